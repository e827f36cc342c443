package statesvc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultRemoteTimeout bounds each call of the remote backend to one server.
const DefaultRemoteTimeout = 10 * time.Second

// Scan page size the remote backend asks for by default.
const (
	defaultScanPagePairs = 4096
	defaultScanPageBytes = 4 << 20
)

// RemoteOptions tune the remote backend beyond Options.
type RemoteOptions struct {
	// Namespace (required) is the job id: every key is stored under it, so
	// jobs sharing the servers never see each other's state (see
	// CheckNamespace and remote_namespace.go).
	Namespace string
	// Timeout bounds each call to one server (one page of a scan);
	// 0 means DefaultRemoteTimeout.
	Timeout time.Duration
	// Dialer, if set, opens the connections (tests).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// ScanPagePairs and ScanPageBytes size the pages of a scan (0 = defaults).
	ScanPagePairs int
	ScanPageBytes int
	// Creds are the transport credentials (TLS); nil means plaintext.
	Creds credentials.TransportCredentials
}

// ParseAddrs splits a comma-separated host:port list (as in the job
// parameter "RemotePebbleAddrs"), dropping blanks.
func ParseAddrs(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Remote is the "remote-pebble" backend: a Store over one or more state
// servers (see Server), sharded by bucket: a state key of bucket b lives on
// server b mod len(addrs). Keys that do not hold a bucket (not built by
// StateKey) live on the first server. The list of addresses, order
// included, must stay the same for the life of the data. A Remote sees only
// the keys of its namespace (RemoteOptions.Namespace); keys and ranges are
// those of the namespace, the prefix never shows.
//
// Guarantees beyond Store: a MultiPut is atomic per server (one batch
// each); a MultiPut whose keys span several servers is split and the parts
// commit independently, so a failure can leave some parts applied. With one
// server it is fully atomic. Scans page through the servers and are not one
// snapshot: writes during a scan may or may not be seen. Safe for
// concurrent use.
type Remote struct {
	namespace string
	prefix    []byte // namespacePrefix(namespace), on every key sent
	shards    []*remoteShard
	timeout   time.Duration
	pairs     int
	bytes     int

	mu     sync.Mutex
	cond   sync.Cond
	active int
	closed bool
}

type remoteShard struct {
	addr string
	conn *grpc.ClientConn
}

// OpenRemote connects (lazily: the first call dials) to the servers at addrs.
func OpenRemote(addrs []string, o RemoteOptions) (*Remote, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("statesvc: remote-pebble needs at least one server address")
	}
	if err := CheckNamespace(o.Namespace); err != nil {
		return nil, fmt.Errorf("statesvc: RemoteOptions.Namespace: %w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultRemoteTimeout
	}
	if o.ScanPagePairs <= 0 {
		o.ScanPagePairs = defaultScanPagePairs
	}
	if o.ScanPageBytes <= 0 {
		o.ScanPageBytes = defaultScanPageBytes
	}
	r := &Remote{namespace: o.Namespace, prefix: namespacePrefix(o.Namespace), timeout: o.Timeout, pairs: o.ScanPagePairs, bytes: o.ScanPageBytes}
	r.cond.L = &r.mu
	creds := o.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(stateCodec{}),
			grpc.MaxCallSendMsgSize(maxStateMessageBytes), grpc.MaxCallRecvMsgSize(maxStateMessageBytes)),
	}
	if o.Dialer != nil {
		dopts = append(dopts, grpc.WithContextDialer(o.Dialer))
	}
	for _, addr := range addrs {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			r.closeConns()
			return nil, fmt.Errorf("statesvc: remote-pebble server address %q: want host:port: %w", addr, err)
		}
		conn, err := grpc.NewClient(addr, dopts...)
		if err != nil {
			r.closeConns()
			return nil, fmt.Errorf("statesvc: remote-pebble server %s: %w", addr, err)
		}
		r.shards = append(r.shards, &remoteShard{addr: addr, conn: conn})
	}
	return r, nil
}

func (r *Remote) enter() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.active++
	return nil
}

func (r *Remote) exit() {
	r.mu.Lock()
	r.active--
	if r.active == 0 && r.closed {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
}

// call runs one unary call on a shard with the per-call timeout and names
// the server in the error.
func (r *Remote) call(sh *remoteShard, method, what string, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if err := sh.conn.Invoke(ctx, method, req, resp); err != nil {
		return fmt.Errorf("statesvc: remote-pebble server %s: %s: %w", sh.addr, what, err)
	}
	return nil
}

// keyBucket reads the bucket of a state key (or of a bucket prefix); ok is
// false for keys too short to hold one.
func keyBucket(k []byte) (bucket int, ok bool) {
	if len(k) == 0 {
		return 0, false
	}
	n := 1 + int(k[0])
	if len(k) < n+2 {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(k[n:])), true
}

func (r *Remote) shardOf(k []byte) int {
	if len(r.shards) == 1 {
		return 0
	}
	b, ok := keyBucket(k)
	if !ok {
		return 0
	}
	return b % len(r.shards)
}

// parallel runs fn for each listed shard, concurrently when there are
// several, and joins the errors.
func parallel(shards []int, fn func(i int) error) error {
	if len(shards) == 1 {
		return fn(shards[0])
	}
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for j, i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Remote) allShards() []int {
	out := make([]int, len(r.shards))
	for i := range out {
		out[i] = i
	}
	return out
}

// MultiGet implements Store: one request per server holding any of the
// keys, all in parallel. Values alias one fresh buffer per server reply.
func (r *Remote) MultiGet(keys [][]byte) ([][]byte, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.exit()
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if len(r.shards) == 1 {
		var resp getResp
		if err := r.call(r.shards[0], methodMultiGet, fmt.Sprintf("multiget of %d keys", len(keys)), &getReq{keys: r.prefixKeys(keys)}, &resp); err != nil {
			return nil, err
		}
		if len(resp.vals) != len(keys) {
			return nil, fmt.Errorf("statesvc: remote-pebble server %s: multiget of %d keys returned %d values", r.shards[0].addr, len(keys), len(resp.vals))
		}
		return resp.vals, nil
	}
	idx := make([][]int, len(r.shards))
	for i, k := range keys {
		s := r.shardOf(k) // of the unprefixed key: placement ignores the namespace
		idx[s] = append(idx[s], i)
	}
	pkeys := r.prefixKeys(keys)
	var used []int
	for s := range idx {
		if len(idx[s]) > 0 {
			used = append(used, s)
		}
	}
	err := parallel(used, func(s int) error {
		ks := make([][]byte, len(idx[s]))
		for j, i := range idx[s] {
			ks[j] = pkeys[i]
		}
		var resp getResp
		sh := r.shards[s]
		if err := r.call(sh, methodMultiGet, fmt.Sprintf("multiget of %d keys", len(ks)), &getReq{keys: ks}, &resp); err != nil {
			return err
		}
		if len(resp.vals) != len(ks) {
			return fmt.Errorf("statesvc: remote-pebble server %s: multiget of %d keys returned %d values", sh.addr, len(ks), len(resp.vals))
		}
		for j, i := range idx[s] {
			out[i] = resp.vals[j] // distinct indexes per shard: no race
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MultiPut implements Store: one batch per server, servers in parallel.
// Atomic per server (see Remote).
func (r *Remote) MultiPut(kvs []KV) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.exit()
	if len(kvs) == 0 {
		return nil
	}
	pkvs := r.prefixKVs(kvs)
	if len(r.shards) == 1 {
		return r.call(r.shards[0], methodMultiPut, fmt.Sprintf("multiput of %d writes", len(kvs)), &putReq{kvs: pkvs}, &emptyResp{})
	}
	parts := make([][]KV, len(r.shards))
	for i, kv := range kvs { // order kept per shard: a later write of a key still wins
		s := r.shardOf(kv.Key) // of the unprefixed key
		parts[s] = append(parts[s], pkvs[i])
	}
	var used []int
	for s := range parts {
		if len(parts[s]) > 0 {
			used = append(used, s)
		}
	}
	return parallel(used, func(s int) error {
		return r.call(r.shards[s], methodMultiPut, fmt.Sprintf("multiput of %d writes", len(parts[s])), &putReq{kvs: parts[s]}, &emptyResp{})
	})
}

// scanShards lists the servers that can hold keys of [start, end). When both
// bounds lie in one operator's key space (as BucketRange builds them), that
// is the servers of the buckets in between; otherwise every server.
func (r *Remote) scanShards(start, end []byte) []int {
	n := len(r.shards)
	if n == 1 || start == nil || end == nil {
		return r.allShards()
	}
	lo, ok := keyBucket(start)
	if !ok {
		return r.allShards()
	}
	p := start[:1+int(start[0])] // length-prefixed operator
	var hi int                   // exclusive
	switch {
	case bytes.HasPrefix(end, p) && len(end) >= len(p)+2:
		hi, _ = keyBucket(end)
		if len(end) > len(p)+2 {
			hi++ // keys of end's own bucket below end
		}
	case bytes.Equal(end, PrefixEnd(p)):
		hi = MaxBuckets
	default:
		return r.allShards()
	}
	if hi <= lo || hi-lo >= n {
		return r.allShards()
	}
	seen := make([]bool, n)
	// Every key in range starts with p; the only ones without a bucket are
	// p+[x] with x > start[len(p)], kept on server 0.
	if x := start[len(p)]; x < 0xff && bytes.Compare(append(bytes.Clone(p), x+1), end) < 0 {
		seen[0] = true
	}
	for b := lo; b < hi; b++ {
		seen[b%n] = true
	}
	var out []int
	for s, ok := range seen {
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// scanCursor pages through one server's part of a scan. Its keys are
// unprefixed; next is in the server's (prefixed) key space.
type scanCursor struct {
	shard      int
	keys, vals [][]byte
	pos        int
	next       []byte // where the next page starts; nil = no more pages
}

func (r *Remote) scanPage(c *scanCursor, start, end []byte) error {
	var resp scanResp
	sh := r.shards[c.shard]
	if err := r.call(sh, methodScan, fmt.Sprintf("scan page from %q", start), &scanReq{start: start, end: end, limit: r.pairs, maxBytes: r.bytes}, &resp); err != nil {
		return err
	}
	if len(resp.keys) == 0 && resp.next != nil {
		return fmt.Errorf("statesvc: remote-pebble server %s: scan page from %q is empty but not the last", sh.addr, start)
	}
	if resp.next != nil && end != nil && bytes.Compare(resp.next, end) >= 0 {
		resp.next = nil
	}
	for i, k := range resp.keys {
		var err error
		if resp.keys[i], err = r.stripKey(sh, k); err != nil {
			return err
		}
	}
	c.keys, c.vals, c.pos, c.next = resp.keys, resp.vals, 0, resp.next
	return nil
}

// Scan implements Store: it pages through every server that can hold keys
// of the range and merges their pages in key order. fn may call the
// store's other methods (not Close). Only the namespace's keys are seen,
// unprefixed.
func (r *Remote) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.exit()
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	shards := r.scanShards(start, end) // of the unprefixed range
	start, end = r.prefixRange(start, end)
	cursors := make([]*scanCursor, len(shards))
	for j, s := range shards {
		cursors[j] = &scanCursor{shard: s}
	}
	err := parallel(indexes(len(cursors)), func(j int) error { return r.scanPage(cursors[j], start, end) })
	if err != nil {
		return err
	}
	for {
		var best *scanCursor
		for _, c := range cursors {
			if c.pos < len(c.keys) && (best == nil || bytes.Compare(c.keys[c.pos], best.keys[best.pos]) < 0) {
				best = c
			}
		}
		if best == nil {
			return nil
		}
		if !fn(best.keys[best.pos], best.vals[best.pos]) {
			return nil
		}
		best.pos++
		if best.pos == len(best.keys) && best.next != nil {
			if err := r.scanPage(best, best.next, end); err != nil {
				return err
			}
		}
	}
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// DeleteRange implements Store on every server, in parallel, within the
// namespace (nil bounds stop at the namespace's ends).
func (r *Remote) DeleteRange(start, end []byte) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.exit()
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	start, end = r.prefixRange(start, end)
	return parallel(r.allShards(), func(s int) error {
		return r.call(r.shards[s], methodDeleteRange, fmt.Sprintf("delete range [%q, %q)", start, end), &rangeReq{start: start, end: end}, &emptyResp{})
	})
}

// ApproxSize implements Store: the sum over the servers that answer, of
// every namespace (the servers size their whole store).
func (r *Remote) ApproxSize() uint64 {
	if r.enter() != nil {
		return 0
	}
	defer r.exit()
	sizes := make([]uint64, len(r.shards))
	_ = parallel(r.allShards(), func(s int) error {
		var resp sizeResp
		if err := r.call(r.shards[s], methodSize, "size", &sizeReq{}, &resp); err != nil {
			return err
		}
		sizes[s] = resp.size
		return nil
	})
	var total uint64
	for _, n := range sizes {
		total += n
	}
	return total
}

// Close implements Store: waits for running calls, then closes the
// connections (the servers keep running). Idempotent.
func (r *Remote) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for r.active > 0 {
		r.cond.Wait()
	}
	r.mu.Unlock()
	return r.closeConns()
}

func (r *Remote) closeConns() error {
	var errs []error
	for _, sh := range r.shards {
		if err := sh.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("statesvc: remote-pebble close connection to %s: %w", sh.addr, err))
		}
	}
	return errors.Join(errs...)
}
