package dataplane

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"koala/dataplane/control"
	"koala/statesvc"
)

// fetchRequest takes state keys from an owner task: the owner returns their
// values and deletes them, because their new owner becomes the only writer.
type fetchRequest struct {
	JobID string
	Task  string
	Keys  [][]byte
}

// fetchReply holds values aligned with the request's keys (nil = absent).
type fetchReply struct {
	Values [][]byte
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
	vals, err := t.keyed.store.MultiGet(req.Keys)
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", req.Task, err)
	}
	dels := make([]statesvc.KV, len(req.Keys))
	for i, k := range req.Keys {
		dels[i] = statesvc.KV{Key: k}
	}
	if err := t.keyed.store.MultiPut(dels); err != nil {
		return nil, fmt.Errorf("fetch from %s: delete moved keys: %w", req.Task, err)
	}
	return &fetchReply{Values: vals}, nil
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
		grpc.WithTransportCredentials(orPlaintext(sc.creds)),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(frameCodec{}), grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)))
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
func (w *Worker) fetchState(ctx context.Context, jobID string, owner control.TaskRef, keys [][]byte) ([][]byte, error) {
	req := &fetchRequest{JobID: jobID, Task: owner.ID, Keys: keys}
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

func appendFetchRequest(buf []byte, r *fetchRequest) []byte {
	buf = appendString(buf, r.JobID)
	buf = appendString(buf, r.Task)
	return appendByteSlices(buf, r.Keys)
}

func decodeFetchRequest(data []byte) (*fetchRequest, error) {
	d := decoder{buf: data}
	r := &fetchRequest{JobID: d.string(), Task: d.string()}
	r.Keys = d.byteSlices()
	if d.err != nil {
		return nil, fmt.Errorf("decode fetch request: %w", d.err)
	}
	return r, nil
}

func appendFetchReply(buf []byte, r *fetchReply) []byte { return appendByteSlices(buf, r.Values) }

func decodeFetchReply(data []byte) (*fetchReply, error) {
	d := decoder{buf: data}
	r := &fetchReply{Values: d.byteSlices()}
	if d.err != nil {
		return nil, fmt.Errorf("decode fetch reply: %w", d.err)
	}
	return r, nil
}

// appendByteSlices encodes a list of optional byte strings: a presence
// byte, then the bytes, so nil and empty stay distinct.
func appendByteSlices(buf []byte, list [][]byte) []byte {
	buf = appendUvarint(buf, uint64(len(list)))
	for _, b := range list {
		if b == nil {
			buf = append(buf, 0)
			continue
		}
		buf = append(buf, 1)
		buf = appendBytes(buf, b)
	}
	return buf
}

func (d *decoder) byteSlices() [][]byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.err = fmt.Errorf("list of %d entries larger than the message", n)
		return nil
	}
	out := make([][]byte, n)
	for i := range out {
		if d.byte() == 1 {
			b := d.bytes()
			out[i] = append(make([]byte, 0, len(b)), b...) // present, possibly empty
		}
		if d.err != nil {
			return nil
		}
	}
	return out
}
