package dataplane

import (
	"bytes"
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
		return t.keyed.takeBucket(req, t.view.Load())
	}
	// The values leave this task: read and deleted past its value cache
	// (statesvc.GetCold, PutCold), which keeps serving its own keys. A
	// drop reads them only for the served log.
	var vals [][]byte
	if req.Mode != exchange.FetchDrop || t.keyed.served.keeps(req.After) {
		var err error
		if vals, err = statesvc.GetCold(t.keyed.store, req.Keys); err != nil {
			return nil, fmt.Errorf("fetch from %s: %w", req.Task, err)
		}
	}
	// Kept before the delete: a checkpoint part written in between holds
	// the values in its store or in its served log, never in neither.
	t.keyed.served.record(req.After, req.Keys, vals)
	dels := make([]statesvc.KV, len(req.Keys))
	for i, k := range req.Keys {
		dels[i] = statesvc.KV{Key: k}
	}
	if err := statesvc.PutCold(t.keyed.store, dels); err != nil {
		return nil, fmt.Errorf("fetch from %s: delete moved keys: %w", req.Task, err)
	}
	if req.Mode == exchange.FetchDrop {
		return &exchange.FetchReply{}, nil // the fetcher has the values already
	}
	return &exchange.FetchReply{Values: vals}, nil
}

// pullCandidates is how many of a bucket's keys a pull reads at a time.
const pullCandidates = 256

// takeBucket serves a bucket pull on task self, whose view is view: it
// takes up to req.Limit user keys of req.Bucket with all their states,
// starting at req.From, and with req.MaxBytes > 0 stops taking keys once
// their state reaches about that; a peek (exchange.FetchPeek) returns them
// and keeps them here.
//
// This task writes nothing to a bucket it is pulled from but the deletes
// of taken keys: it gave the bucket away, or — a bucket moving back to it
// — its records wait at the gate until the task pulling from it has
// handed it back (route_drain.go), which that task does only between two
// of its pulls. So the bucket's keys are listed (statesvc.FrozenKeys) in
// key order from any key on, and a pull resumes at the key where the
// previous one stopped instead of walking the bucket from its start over
// the deletes of every key already taken, with nothing written back for
// it. A key listed may have been taken since: the values are read through
// the store, and a key without any is skipped.
func (ks *keyedState) takeBucket(req *exchange.FetchRequest, view *taskView) (*exchange.FetchReply, error) {
	bucket, limit, maxBytes := req.Bucket, req.Limit, req.MaxBytes
	if err := statesvc.CheckBucket(bucket); err != nil || bucket >= max(1, ks.buckets) {
		return nil, fmt.Errorf("pull from %s: bucket %d outside [0, %d)", ks.opName, bucket, max(1, ks.buckets))
	}
	start, end := statesvc.BucketRange(ks.opName, bucket, bucket+1)
	from := start
	if req.From != nil {
		if bytes.Compare(req.From, start) < 0 || bytes.Compare(req.From, end) >= 0 {
			return nil, fmt.Errorf("pull bucket %d of %s: resume key %q outside the bucket", bucket, ks.opName, req.From)
		}
		from = req.From
	}
	lister, err := ks.frozenKeys(view)
	if err != nil {
		return nil, fmt.Errorf("pull bucket %d of %s: %w", bucket, ks.opName, err)
	}
	type candidate struct{ user, skey []byte }
	var (
		cands []candidate
		seen  = map[string]bool{}
		users [][]byte
		vals  [][]byte
		size  int
		next  []byte
	)
	// take reads the candidates' values and takes those that have any,
	// until a bound; it reports whether to go on.
	take := func() bool {
		skeys := make([][]byte, 0, len(cands)*len(ks.names))
		var kb stateKeyBuf
		for _, c := range cands {
			for _, n := range ks.names {
				skeys = append(skeys, kb.keyInBucket(ks, bucket, n, c.user))
			}
		}
		var got [][]byte
		if got, err = statesvc.GetCold(ks.store, skeys); err != nil {
			return false
		}
		for i, c := range cands {
			cv := got[i*len(ks.names) : (i+1)*len(ks.names)]
			n := 0
			for j, v := range cv {
				if v != nil {
					n += len(skeys[i*len(ks.names)+j]) + len(v)
				}
			}
			if n == 0 {
				continue // taken since Pebble listed it
			}
			if len(users) == limit || maxBytes > 0 && size >= maxBytes {
				next = c.skey
				return false
			}
			users = append(users, c.user)
			vals = append(vals, cv...)
			size += n
		}
		cands = cands[:0]
		return true
	}
	scanErr := lister.Keys(from, end, func(k []byte) bool {
		_, _, _, user, perr := statesvc.ParseStateKey(k)
		if perr != nil {
			err = perr
			return false
		}
		// A key's states lie apart (the layout is operator | bucket |
		// state | key): the first state met takes them all, and a pull
		// resuming in a later state's run finds the earlier ones taken.
		if seen[string(user)] {
			return true
		}
		seen[string(user)] = true
		cands = append(cands, candidate{user: append([]byte(nil), user...), skey: append([]byte(nil), k...)})
		return len(cands) < pullCandidates || take()
	})
	if err == nil && scanErr == nil && next == nil && len(cands) > 0 {
		take()
	}
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return nil, fmt.Errorf("pull bucket %d of %s: %w", bucket, ks.opName, err)
	}
	rep := &exchange.FetchReply{Keys: users, Values: vals, More: next != nil, Next: next}
	if req.Mode == exchange.FetchPeek {
		return rep, nil
	}
	skeys := make([][]byte, 0, len(users)*len(ks.names))
	for _, u := range users {
		for _, n := range ks.names {
			skeys = append(skeys, ks.stateKey(n, u))
		}
	}
	ks.served.record(req.After, skeys, vals)
	dels := make([]statesvc.KV, len(skeys))
	for i, k := range skeys {
		dels[i] = statesvc.KV{Key: k}
	}
	if err := statesvc.PutCold(ks.store, dels); err != nil {
		return nil, fmt.Errorf("pull bucket %d of %s: delete moved keys: %w", bucket, ks.opName, err)
	}
	return rep, nil
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

// pullState takes up to limit user keys of bucket from owner, starting at
// from (nil: the bucket's start), and with maxBytes > 0 about that many
// bytes of their state (see exchange.FetchRequest; mode FetchTake or
// FetchPeek); vals holds perKey values per key, more says the owner
// stopped at a bound and next is where the next pull starts.
func (w *Worker) pullState(ctx context.Context, jobID string, owner control.TaskRef, bucket, limit, maxBytes, perKey int, from []byte, mode exchange.FetchMode, after string) (keys, vals [][]byte, more bool, next []byte, err error) {
	req := &exchange.FetchRequest{JobID: jobID, Task: owner.ID, Bucket: bucket, Limit: limit, MaxBytes: maxBytes, After: after, From: from, Mode: mode}
	var rep *exchange.FetchReply
	if owner.WorkerID == w.opts.ID {
		rep, err = w.takeState(req)
	} else {
		if rep, err = w.state.Fetch(ctx, owner.DataAddr, req); err != nil {
			err = fmt.Errorf("pull bucket %d from task %s at %s: %w", bucket, owner.ID, owner.DataAddr, err)
		}
	}
	if err != nil {
		return nil, nil, false, nil, err
	}
	if len(rep.Keys) > limit || len(rep.Values) != len(rep.Keys)*perKey || rep.More != (rep.Next != nil) {
		return nil, nil, false, nil, fmt.Errorf("pull bucket %d from task %s: %d keys and %d values for a limit of %d keys of %d states, more %v with next key %q", bucket, owner.ID, len(rep.Keys), len(rep.Values), limit, perKey, rep.More, rep.Next)
	}
	return rep.Keys, rep.Values, rep.More, rep.Next, nil
}

// dropState deletes keys on owner whose values this task already stored
// (a background chunk's third step; see migrator); after as for fetchState.
func (w *Worker) dropState(ctx context.Context, jobID string, owner control.TaskRef, keys [][]byte, after string) error {
	req := &exchange.FetchRequest{JobID: jobID, Task: owner.ID, Keys: keys, After: after, Mode: exchange.FetchDrop}
	if owner.WorkerID == w.opts.ID {
		_, err := w.takeState(req)
		return err
	}
	if _, err := w.state.Fetch(ctx, owner.DataAddr, req); err != nil {
		return fmt.Errorf("drop %d migrated keys on task %s at %s: %w", len(keys), owner.ID, owner.DataAddr, err)
	}
	return nil
}

// frozenKeys lists the keys of the operator's buckets for bucket pulls
// (statesvc.FrozenKeys, valid for the buckets this task does not write:
// see takeBucket), made once per view: pulls come chunk after chunk, and
// which buckets are written here changes only with the view.
func (ks *keyedState) frozenKeys(view *taskView) (statesvc.KeyLister, error) {
	ks.frozenMu.Lock()
	defer ks.frozenMu.Unlock()
	if ks.frozen != nil && ks.frozenView == view {
		return ks.frozen, nil
	}
	start, end := statesvc.BucketRange(ks.opName, 0, max(1, ks.buckets))
	lister, err := statesvc.FrozenKeys(ks.store, []statesvc.KeyRange{{Start: start, End: end}})
	if err != nil {
		return nil, err
	}
	ks.frozen, ks.frozenView = lister, view
	return lister, nil
}

// keeps says whether record would keep values taken by a task whose last
// checkpoint is after (see servedLog.record): a drop reads the values it
// deletes only then.
func (l *servedLog) keeps(after string) bool {
	if after == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return after > l.passed
}
