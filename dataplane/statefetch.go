package dataplane

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"koala/dataplane/control"
	"koala/dataplane/transport"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// fetchRequest takes state keys from an owner task: the owner returns their
// values and deletes them, because their new owner becomes the only writer.
// A fetch of a key the owner does not hold (the key lookup table keeps key
// hashes, so it can name an owner for a key that is local) returns nil
// values and deletes nothing.
//
// With Limit > 0 it is a bucket pull instead (progressive migration): the
// owner takes up to Limit user keys of Bucket — every state of each — and
// returns them; fewer than Limit means the owner holds no more of Bucket.
//
// After is the last checkpoint the requesting task wrote its part of ("" =
// none): the owner keeps what it hands out to a task that is ahead of it
// in a checkpoint, for its own part of that checkpoint (see servedLog).
type fetchRequest struct {
	JobID  string
	Task   string
	Keys   [][]byte
	Bucket int
	Limit  int
	After  string
}

// fetchReply holds values aligned with the request's keys (nil = absent).
// For a bucket pull, Keys are the user keys taken and Values hold, per
// key, one value per state name of the operator in declaration order.
type fetchReply struct {
	Values [][]byte
	Keys   [][]byte
}

const fetchMethod = "/koala.Exchange/Fetch"

func fetchHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	req := new(fetchRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	return srv.(*Worker).takeState(req)
}

// takeState serves a fetch from the store of a local task.
func (w *Worker) takeState(req *fetchRequest) (*fetchReply, error) {
	w.mu.Lock()
	t := w.tasks[req.JobID+"/"+req.Task]
	w.mu.Unlock()
	if t == nil || t.keyed == nil {
		return nil, fmt.Errorf("worker %s: no stateful task %q of job %q to fetch from", w.opts.ID, req.Task, req.JobID)
	}
	if req.Limit > 0 {
		return t.keyed.takeBucket(req.Bucket, req.Limit, req.After)
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
	return &fetchReply{Values: vals}, nil
}

// takeBucket serves a bucket pull: it takes up to limit user keys of bucket
// with all their states.
func (ks *keyedState) takeBucket(bucket, limit int, after string) (*fetchReply, error) {
	if err := statesvc.CheckBucket(bucket); err != nil || bucket >= max(1, ks.buckets) {
		return nil, fmt.Errorf("pull from %s: bucket %d outside [0, %d)", ks.opName, bucket, max(1, ks.buckets))
	}
	start, end := statesvc.BucketRange(ks.opName, bucket, bucket+1)
	var users [][]byte
	seen := map[string]bool{}
	var parseErr error
	err := ks.store.Scan(start, end, func(k, _ []byte) bool {
		_, _, _, user, err := statesvc.ParseStateKey(k)
		if err != nil {
			parseErr = err
			return false
		}
		if !seen[string(user)] {
			if len(users) == limit {
				return false
			}
			seen[string(user)] = true
			users = append(users, append([]byte(nil), user...))
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
	return &fetchReply{Keys: users, Values: vals}, nil
}

// stateConns keeps one client connection per remote worker for fetches.
type stateConns struct {
	creds credentials.TransportCredentials // set once by NewWorker
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (sc *stateConns) get(addr string) (*grpc.ClientConn, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if c, ok := sc.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(transport.OrPlaintext(sc.creds)),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(frameCodec{}), grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("state plane: dial %s: %w", addr, err)
	}
	if sc.conns == nil {
		sc.conns = map[string]*grpc.ClientConn{}
	}
	sc.conns[addr] = c
	return c, nil
}

func (sc *stateConns) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, c := range sc.conns {
		_ = c.Close()
	}
	sc.conns = nil
}

// fetchState takes keys from owner, in memory when it runs here.
// after is the fetching task's last checkpoint (see fetchRequest).
func (w *Worker) fetchState(ctx context.Context, jobID string, owner control.TaskRef, keys [][]byte, after string) ([][]byte, error) {
	req := &fetchRequest{JobID: jobID, Task: owner.ID, Keys: keys, After: after}
	if owner.WorkerID == w.opts.ID {
		rep, err := w.takeState(req)
		if err != nil {
			return nil, err
		}
		return rep.Values, nil
	}
	conn, err := w.state.get(owner.DataAddr)
	if err != nil {
		return nil, err
	}
	rep := new(fetchReply)
	if err := conn.Invoke(ctx, fetchMethod, req, rep); err != nil {
		return nil, fmt.Errorf("fetch %d keys from task %s at %s: %w", len(keys), owner.ID, owner.DataAddr, err)
	}
	if len(rep.Values) != len(keys) {
		return nil, fmt.Errorf("fetch from task %s: %d values for %d keys", owner.ID, len(rep.Values), len(keys))
	}
	return rep.Values, nil
}

// pullState takes up to limit user keys of bucket from owner (see
// fetchRequest); vals holds perKey values per key.
func (w *Worker) pullState(ctx context.Context, jobID string, owner control.TaskRef, bucket, limit, perKey int, after string) (keys, vals [][]byte, err error) {
	req := &fetchRequest{JobID: jobID, Task: owner.ID, Bucket: bucket, Limit: limit, After: after}
	var rep *fetchReply
	if owner.WorkerID == w.opts.ID {
		rep, err = w.takeState(req)
	} else {
		var conn *grpc.ClientConn
		if conn, err = w.state.get(owner.DataAddr); err != nil {
			return nil, nil, err
		}
		rep = new(fetchReply)
		if err = conn.Invoke(ctx, fetchMethod, req, rep); err != nil {
			err = fmt.Errorf("pull bucket %d from task %s at %s: %w", bucket, owner.ID, owner.DataAddr, err)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if len(rep.Keys) > limit || len(rep.Values) != len(rep.Keys)*perKey {
		return nil, nil, fmt.Errorf("pull bucket %d from task %s: %d keys and %d values for a limit of %d keys of %d states", bucket, owner.ID, len(rep.Keys), len(rep.Values), limit, perKey)
	}
	return rep.Keys, rep.Values, nil
}

func appendFetchRequest(buf []byte, r *fetchRequest) []byte {
	buf = wire.AppendString(buf, r.JobID)
	buf = wire.AppendString(buf, r.Task)
	buf = wire.AppendByteSlices(buf, r.Keys)
	buf = wire.AppendUvarint(buf, uint64(r.Bucket))
	buf = wire.AppendUvarint(buf, uint64(r.Limit))
	return wire.AppendString(buf, r.After)
}

func decodeFetchRequest(data []byte) (*fetchRequest, error) {
	d := wire.NewDecoder(data)
	r := &fetchRequest{JobID: d.Str(), Task: d.Str()}
	r.Keys = d.ByteSlices()
	bucket, limit := d.Uvarint(), d.Uvarint()
	r.After = d.Str()
	switch {
	case d.Err() != nil:
		return nil, fmt.Errorf("decode fetch request: %w", d.Err())
	case len(d.Rest()) != 0:
		return nil, fmt.Errorf("decode fetch request: %d trailing bytes", len(d.Rest()))
	case bucket >= statesvc.MaxBuckets:
		return nil, fmt.Errorf("decode fetch request: bucket %d, allowed [0, %d)", bucket, statesvc.MaxBuckets)
	case limit > wire.MaxFrameRecords:
		return nil, fmt.Errorf("decode fetch request: pull limit %d, at most %d allowed", limit, wire.MaxFrameRecords)
	}
	r.Bucket, r.Limit = int(bucket), int(limit)
	return r, nil
}

func appendFetchReply(buf []byte, r *fetchReply) []byte {
	buf = wire.AppendByteSlices(buf, r.Values)
	return wire.AppendByteSlices(buf, r.Keys)
}

func decodeFetchReply(data []byte) (*fetchReply, error) {
	d := wire.NewDecoder(data)
	r := &fetchReply{Values: d.ByteSlices(), Keys: d.ByteSlices()}
	if d.Err() == nil && len(d.Rest()) != 0 {
		d.Fail(fmt.Errorf("%d trailing bytes", len(d.Rest())))
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("decode fetch reply: %w", d.Err())
	}
	return r, nil
}
