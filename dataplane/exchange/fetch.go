package exchange

import (
	"bytes"
	"context"
	"fmt"
	"koala/dataplane/transport"
	"koala/dataplane/wire"
	"koala/statesvc"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// FetchRequest takes state keys from an owner task: the owner returns their
// values and deletes them, because their new owner becomes the only writer.
// A fetch of a key the owner does not hold (the key lookup table keeps key
// hashes, so it can name an owner for a key that is local) returns nil
// values and deletes nothing.
//
// With Limit > 0 it is a bucket pull instead (progressive migration): the
// owner takes up to Limit user keys of Bucket — every state of each — and
// returns them; fewer than Limit means the owner holds no more of Bucket.
// MaxBytes > 0 also bounds the pull by size (stop-and-restart's chunks,
// StateMigrationChunkSize): the owner stops taking keys once their state
// reaches it, and the reply's More says whether keys of Bucket are left.
//
// After is the last checkpoint the requesting task wrote its part of ("" =
// none): the owner keeps what it hands out to a task that is ahead of it
// in a checkpoint, for its own part of that checkpoint (see servedLog).
//
// A bucket pull starts at From, a state key of Bucket (empty: the bucket's
// start), where the previous pull of the bucket stopped (the reply's
// Next): a bucket comes in chunks, and scanning each from the bucket's
// start would walk the deletes of every key already taken.
//
// Mode says what the owner does with the state: FetchTake (the default)
// returns and deletes it; FetchPeek (bucket pulls only) returns it and
// keeps it, for a background migrator that stores a copy first and then
// deletes with FetchDrop (keyed fetches only), which deletes the keys and
// returns no values. Between the two the keys stay where they are, so a
// batch that needs one of them meanwhile takes it from the owner as usual.
type FetchRequest struct {
	JobID  string
	Task   string
	Keys   [][]byte
	Bucket int
	Limit  int
	After  string
	// MaxBytes bounds a bucket pull's state bytes (0: only Limit).
	MaxBytes int
	From     []byte
	Mode     FetchMode
}

// FetchMode is what a fetch does with the owner's state (see FetchRequest).
type FetchMode uint8

const (
	FetchTake FetchMode = iota
	FetchPeek
	FetchDrop
)

// FetchReply holds values aligned with the request's keys (nil = absent).
// For a bucket pull, Keys are the user keys taken and Values hold, per
// key, one value per state name of the operator in declaration order.
type FetchReply struct {
	Values [][]byte
	Keys   [][]byte
	// More: a bucket pull stopped at its Limit or MaxBytes, so the owner
	// may hold more keys of the bucket; the next pull starts at Next.
	More bool
	Next []byte
}

const fetchMethod = "/koala.Exchange/Fetch"

func fetchHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	req := new(FetchRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	return srv.(Handler).TakeState(req)
}

// StateConns keeps one client connection per remote worker for fetches.
type StateConns struct {
	creds credentials.TransportCredentials
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (sc *StateConns) get(addr string) (*grpc.ClientConn, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if c, ok := sc.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(transport.OrPlaintext(sc.creds)),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{}), grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("state plane: dial %s: %w", addr, err)
	}
	if sc.conns == nil {
		sc.conns = map[string]*grpc.ClientConn{}
	}
	sc.conns[addr] = c
	return c, nil
}

// Close closes every connection.
func (sc *StateConns) Close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, c := range sc.conns {
		_ = c.Close()
	}
	sc.conns = nil
}

func AppendFetchRequest(buf []byte, r *FetchRequest) []byte {
	buf = wire.AppendString(buf, r.JobID)
	buf = wire.AppendString(buf, r.Task)
	buf = wire.AppendByteSlices(buf, r.Keys)
	buf = wire.AppendUvarint(buf, uint64(r.Bucket))
	buf = wire.AppendUvarint(buf, uint64(r.Limit))
	buf = wire.AppendString(buf, r.After)
	buf = wire.AppendUvarint(buf, uint64(r.MaxBytes))
	buf = wire.AppendBytes(buf, r.From)
	return append(buf, byte(r.Mode))
}

func DecodeFetchRequest(data []byte) (*FetchRequest, error) {
	d := wire.NewDecoder(data)
	r := &FetchRequest{JobID: d.Str(), Task: d.Str()}
	r.Keys = d.ByteSlices()
	bucket, limit := d.Uvarint(), d.Uvarint()
	r.After = d.Str()
	maxBytes := d.Uvarint()
	r.From = d.Bytes()
	if len(r.From) == 0 {
		r.From = nil
	}
	r.Mode = FetchMode(d.Byte())
	switch {
	case d.Err() != nil:
		return nil, fmt.Errorf("decode fetch request: %w", d.Err())
	case len(d.Rest()) != 0:
		return nil, fmt.Errorf("decode fetch request: %d trailing bytes", len(d.Rest()))
	case bucket >= statesvc.MaxBuckets:
		return nil, fmt.Errorf("decode fetch request: bucket %d, allowed [0, %d)", bucket, statesvc.MaxBuckets)
	case limit > wire.MaxFrameRecords:
		return nil, fmt.Errorf("decode fetch request: pull limit %d, at most %d allowed", limit, wire.MaxFrameRecords)
	case maxBytes > maxMessageBytes:
		return nil, fmt.Errorf("decode fetch request: pull of %d bytes, at most %d allowed", maxBytes, maxMessageBytes)
	case r.Mode > FetchDrop:
		return nil, fmt.Errorf("decode fetch request: mode %d, allowed %d (take), %d (peek), %d (drop)", r.Mode, FetchTake, FetchPeek, FetchDrop)
	case r.Mode == FetchPeek && limit == 0:
		return nil, fmt.Errorf("decode fetch request: a peek must be a bucket pull (limit > 0)")
	case r.Mode == FetchDrop && limit > 0:
		return nil, fmt.Errorf("decode fetch request: a drop must name keys, not pull a bucket")
	}
	r.Bucket, r.Limit, r.MaxBytes = int(bucket), int(limit), int(maxBytes)
	return r, nil
}

// FetchReplySize is the exact length of r's encoding by AppendFetchReply.
func FetchReplySize(r *FetchReply) int {
	return wire.ByteSlicesSize(r.Values) + wire.ByteSlicesSize(r.Keys) + 1 + wire.BytesSize(r.Next)
}

func AppendFetchReply(buf []byte, r *FetchReply) []byte {
	buf = wire.AppendByteSlices(buf, r.Values)
	buf = wire.AppendByteSlices(buf, r.Keys)
	more := byte(0)
	if r.More {
		more = 1
	}
	buf = append(buf, more)
	return wire.AppendBytes(buf, r.Next)
}

func DecodeFetchReply(data []byte) (*FetchReply, error) {
	d := wire.NewDecoder(data)
	r := &FetchReply{Values: d.ByteSlices(), Keys: d.ByteSlices()}
	r.More = d.Byte() == 1
	if next := d.Bytes(); len(next) > 0 {
		r.Next = bytes.Clone(next) // nothing of r aliases data (codec.Unmarshal)
	}
	if d.Err() == nil && len(d.Rest()) != 0 {
		d.Fail(fmt.Errorf("%d trailing bytes", len(d.Rest())))
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("decode fetch reply: %w", d.Err())
	}
	return r, nil
}

// NewStateConns dials with creds (nil: plaintext).
func NewStateConns(creds credentials.TransportCredentials) *StateConns {
	return &StateConns{creds: creds}
}

// Fetch sends req to the worker at addr and returns its reply.
func (sc *StateConns) Fetch(ctx context.Context, addr string, req *FetchRequest) (*FetchReply, error) {
	conn, err := sc.get(addr)
	if err != nil {
		return nil, err
	}
	rep := new(FetchReply)
	if err := conn.Invoke(ctx, fetchMethod, req, rep); err != nil {
		return nil, err
	}
	return rep, nil
}
