package dataplane

import (
	"context"
	"fmt"

	"koala/dataplane/control"
	"koala/dataplane/exchange"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// exchangeHandler is the worker as its exchange server sees it.
type exchangeHandler struct{ w *Worker }

func (h exchangeHandler) DeliverLocal(ctx context.Context, f *wire.Frame) error {
	return h.w.deliverLocal(ctx, f)
}

func (h exchangeHandler) TakeState(req *exchange.FetchRequest) (*exchange.FetchReply, error) {
	return h.w.takeState(req)
}

// takeState serves a fetch from the store of a local task.
func (w *Worker) takeState(req *exchange.FetchRequest) (*exchange.FetchReply, error) {
	w.mu.Lock()
	t := w.tasks[req.JobID+"/"+req.Task]
	w.mu.Unlock()
	if t == nil || t.keyed == nil {
		return nil, fmt.Errorf("worker %s: no stateful task %q of job %q to fetch from", w.opts.ID, req.Task, req.JobID)
	}
	if req.Limit > 0 {
		return t.keyed.takeBucket(req.Bucket, req.Limit, req.MaxBytes, req.After)
	}
	vals, err := t.keyed.store.MultiGet(req.Keys)
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", req.Task, err)
	}
	// Kept before the delete: a checkpoint part written in between holds
	// the values in its store or in its served log, never in neither.
	t.keyed.served.record(req.After, req.Keys, vals)
	dels := make([]statesvc.KV, len(req.Keys))
	for i, k := range req.Keys {
		dels[i] = statesvc.KV{Key: k}
	}
	if err := t.keyed.store.MultiPut(dels); err != nil {
		return nil, fmt.Errorf("fetch from %s: delete moved keys: %w", req.Task, err)
	}
	return &exchange.FetchReply{Values: vals}, nil
}

// takeBucket serves a bucket pull: it takes up to limit user keys of bucket
// with all their states, and with maxBytes > 0 stops taking keys once
// their state reaches about maxBytes. The scan meets a key's first state
// first (the layout is operator | bucket | state | key), so that state's
// size times the number of states is the estimate.
func (ks *keyedState) takeBucket(bucket, limit, maxBytes int, after string) (*exchange.FetchReply, error) {
	if err := statesvc.CheckBucket(bucket); err != nil || bucket >= max(1, ks.buckets) {
		return nil, fmt.Errorf("pull from %s: bucket %d outside [0, %d)", ks.opName, bucket, max(1, ks.buckets))
	}
	start, end := statesvc.BucketRange(ks.opName, bucket, bucket+1)
	var users [][]byte
	seen := map[string]bool{}
	var parseErr error
	more := false
	size := 0
	err := ks.store.Scan(start, end, func(k, v []byte) bool {
		_, _, _, user, err := statesvc.ParseStateKey(k)
		if err != nil {
			parseErr = err
			return false
		}
		if !seen[string(user)] {
			if len(users) == limit || maxBytes > 0 && size >= maxBytes {
				more = true
				return false
			}
			seen[string(user)] = true
			users = append(users, append([]byte(nil), user...))
			size += (len(k) + len(v)) * max(1, len(ks.names))
		}
		return true
	})
	if err == nil {
		err = parseErr
	}
	if err != nil {
		return nil, fmt.Errorf("pull bucket %d of %s: %w", bucket, ks.opName, err)
	}
	skeys := make([][]byte, 0, len(users)*len(ks.names))
	for _, u := range users {
		for _, n := range ks.names {
			skeys = append(skeys, ks.stateKey(n, u))
		}
	}
	vals, err := ks.store.MultiGet(skeys)
	if err != nil {
		return nil, fmt.Errorf("pull bucket %d of %s: %w", bucket, ks.opName, err)
	}
	ks.served.record(after, skeys, vals)
	dels := make([]statesvc.KV, len(skeys))
	for i, k := range skeys {
		dels[i] = statesvc.KV{Key: k}
	}
	if err := ks.store.MultiPut(dels); err != nil {
		return nil, fmt.Errorf("pull bucket %d of %s: delete moved keys: %w", bucket, ks.opName, err)
	}
	return &exchange.FetchReply{Keys: users, Values: vals, More: more}, nil
}

// fetchState takes keys from owner, in memory when it runs here.
// after is the fetching task's last checkpoint (see exchange.FetchRequest).
func (w *Worker) fetchState(ctx context.Context, jobID string, owner control.TaskRef, keys [][]byte, after string) ([][]byte, error) {
	req := &exchange.FetchRequest{JobID: jobID, Task: owner.ID, Keys: keys, After: after}
	if owner.WorkerID == w.opts.ID {
		rep, err := w.takeState(req)
		if err != nil {
			return nil, err
		}
		return rep.Values, nil
	}
	rep, err := w.state.Fetch(ctx, owner.DataAddr, req)
	if err != nil {
		return nil, fmt.Errorf("fetch %d keys from task %s at %s: %w", len(keys), owner.ID, owner.DataAddr, err)
	}
	if len(rep.Values) != len(keys) {
		return nil, fmt.Errorf("fetch from task %s: %d values for %d keys", owner.ID, len(rep.Values), len(keys))
	}
	return rep.Values, nil
}

// pullState takes up to limit user keys of bucket from owner, and with
// maxBytes > 0 about that many bytes of their state (see
// exchange.FetchRequest); vals holds perKey values per key, more says the
// owner stopped at a bound.
func (w *Worker) pullState(ctx context.Context, jobID string, owner control.TaskRef, bucket, limit, maxBytes, perKey int, after string) (keys, vals [][]byte, more bool, err error) {
	req := &exchange.FetchRequest{JobID: jobID, Task: owner.ID, Bucket: bucket, Limit: limit, MaxBytes: maxBytes, After: after}
	var rep *exchange.FetchReply
	if owner.WorkerID == w.opts.ID {
		rep, err = w.takeState(req)
	} else {
		if rep, err = w.state.Fetch(ctx, owner.DataAddr, req); err != nil {
			err = fmt.Errorf("pull bucket %d from task %s at %s: %w", bucket, owner.ID, owner.DataAddr, err)
		}
	}
	if err != nil {
		return nil, nil, false, err
	}
	if len(rep.Keys) > limit || len(rep.Values) != len(rep.Keys)*perKey {
		return nil, nil, false, fmt.Errorf("pull bucket %d from task %s: %d keys and %d values for a limit of %d keys of %d states", bucket, owner.ID, len(rep.Keys), len(rep.Values), limit, perKey)
	}
	return rep.Keys, rep.Values, rep.More, nil
}
