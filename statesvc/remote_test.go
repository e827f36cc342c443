package statesvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The remote backend runs the Store conformance tests with one server, with
// three (keys sharded by bucket, scans merged) and with three and tiny scan
// pages (paging and merging at every step).
func init() {
	backends = append(backends,
		struct {
			name string
			open func(t testing.TB) Store
		}{"remote-1", func(t testing.TB) Store {
			return mustOpen(t, Options{Backend: BackendRemotePebble, Addrs: startServers(t, 1), Namespace: testNamespace})
		}},
		struct {
			name string
			open func(t testing.TB) Store
		}{"remote-3", func(t testing.TB) Store {
			return mustOpen(t, Options{Backend: BackendRemotePebble, Addrs: startServers(t, 3), Namespace: testNamespace})
		}},
		struct {
			name string
			open func(t testing.TB) Store
		}{"remote-3-paged", func(t testing.TB) Store {
			return mustOpenRemote(t, startServers(t, 3), RemoteOptions{ScanPagePairs: 2})
		}},
	)
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startServers starts n state servers on loopback, each with its own Pebble
// directory, stopped when the test ends (after stores opened later closed).
func startServers(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for i := 0; i < n; i++ {
		s := startServer(t, t.TempDir())
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

func startServer(t testing.TB, dir string) *Server {
	t.Helper()
	s, err := NewServer(ServerOptions{Dir: dir, Listen: "127.0.0.1:0", Logger: quietLog()})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return s
}

// testNamespace is the namespace of remote stores opened without one.
const testNamespace = "test-job"

func mustOpenRemote(t testing.TB, addrs []string, o RemoteOptions) *Remote {
	t.Helper()
	if o.Namespace == "" {
		o.Namespace = testNamespace
	}
	r, err := OpenRemote(addrs, o)
	if err != nil {
		t.Fatalf("OpenRemote(%v): %v", addrs, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRemoteWireRoundTrip(t *testing.T) {
	msgs := []struct{ in, out any }{
		{&getReq{keys: [][]byte{[]byte("a"), {}, []byte("\x00\xff")}}, &getReq{}},
		{&getResp{vals: [][]byte{nil, {}, []byte("v")}}, &getResp{}},
		{&putReq{kvs: []KV{{[]byte("k"), nil}, {[]byte("e"), []byte{}}, {[]byte("x"), []byte("y")}}}, &putReq{}},
		{&scanReq{start: nil, end: []byte("z"), limit: 7, maxBytes: 1 << 20}, &scanReq{}},
		{&scanResp{keys: [][]byte{[]byte("a")}, vals: [][]byte{{}}, next: []byte("b")}, &scanResp{}},
		{&scanResp{keys: [][]byte{}, vals: [][]byte{}}, &scanResp{}},
		{&rangeReq{start: []byte{}, end: nil}, &rangeReq{}},
		{&sizeResp{size: 1 << 40}, &sizeResp{}},
	}
	for _, m := range msgs {
		b, err := marshalState(m.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := unmarshalState(b, m.out); err != nil {
			t.Fatalf("%T: %v", m.in, err)
		}
		if got, want := fmt.Sprintf("%#v", m.out), fmt.Sprintf("%#v", m.in); got != want {
			t.Errorf("round trip:\n got %s\nwant %s", got, want)
		}
		// Every truncation fails cleanly (no panic, no huge allocation).
		for i := 0; i < len(b); i++ {
			if err := unmarshalState(b[:i], m.out); err == nil {
				t.Errorf("%T truncated to %d of %d bytes decoded without error", m.in, i, len(b))
			}
		}
	}
	if err := unmarshalState([]byte("G\xff\xff\xff\xff\x0f"), &getReq{}); err == nil {
		t.Fatal("decoded a list longer than its message")
	}
	if err := unmarshalState([]byte("P\x00"), &getReq{}); err == nil || !strings.Contains(err.Error(), "want message") {
		t.Fatalf("wrong tag: %v", err)
	}
}

func TestRemoteScanShards(t *testing.T) {
	r := &Remote{shards: make([]*remoteShard, 3)}
	for _, c := range []struct {
		lo, hi int
		want   string
	}{
		{0, 1, "[0]"},
		{1, 2, "[1]"},
		{2, 3, "[2]"},
		{4, 6, "[1 2]"},
		{3, 6, "[0 1 2]"},
		{255, 256, "[0]"}, // bucket 255 % 3 = 0 (and short keys too)
		{256, 257, "[1]"}, // crosses a high-byte boundary
		{0, MaxBuckets, "[0 1 2]"},
		{MaxBuckets - 1, MaxBuckets, "[0]"}, // 65535 % 3 = 0
		{MaxBuckets - 2, MaxBuckets, "[0 2]"},
	} {
		start, end := BucketRange("agg", c.lo, c.hi)
		if got := fmt.Sprint(r.scanShards(start, end)); got != c.want {
			t.Errorf("buckets [%d, %d): shards %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
	// A range inside one bucket.
	k1, k2 := StateKey(nil, "agg", 5, "a", nil), StateKey(nil, "agg", 5, "b", nil)
	if got := fmt.Sprint(r.scanShards(k1, k2)); got != "[2]" {
		t.Errorf("inside bucket 5: %s", got)
	}
	// Spanning a high-byte step: a short key agg+[1] could sort inside.
	start, _ := BucketRange("agg", 254, 255)
	_, end := BucketRange("agg", 256, 257)
	if got := fmt.Sprint(r.scanShards(start, end)); got != "[0 1 2]" {
		t.Errorf("buckets 254..256: %s", got)
	}
	for _, c := range [][2][]byte{{nil, nil}, {[]byte("a"), []byte("b")}, {k1, nil}, {k1, StateKey(nil, "agh", 0, "a", nil)}} {
		if got := fmt.Sprint(r.scanShards(c[0], c[1])); got != "[0 1 2]" {
			t.Errorf("scanShards(%q, %q) = %s, want all", c[0], c[1], got)
		}
	}
}

// TestRemoteShardedScanMerge writes state keys of many buckets (plus keys
// without a bucket) over three servers and checks every bucket range scans
// exactly the keys a local store holds, in order, with tiny pages.
func TestRemoteShardedScanMerge(t *testing.T) {
	addrs := startServers(t, 3)
	r := mustOpenRemote(t, addrs, RemoteOptions{ScanPagePairs: 3})
	m := NewMemory()
	var kvs []KV
	for b := 0; b < 20; b++ {
		for i := 0; i < 5; i++ {
			kvs = append(kvs, KV{StateKey(nil, "agg", b, "count", []byte(fmt.Sprintf("u%d", i))), []byte(fmt.Sprint(b*10 + i))})
		}
	}
	kvs = append(kvs, KV{[]byte("\x03agg\x00"), []byte("short")}, KV{[]byte("zz"), []byte("z")}, KV{[]byte("\x03agg\xff\xff"), []byte("last-bucket-prefix")})
	for _, s := range []Store{r, m} {
		if err := s.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
	}
	// Each server holds only its buckets.
	for i, addr := range addrs {
		one := mustOpenRemote(t, []string{addr}, RemoteOptions{})
		err := one.Scan(nil, nil, func(k, v []byte) bool {
			if b, ok := keyBucket(k); ok && b%3 != i {
				t.Errorf("server %d holds bucket %d", i, b)
			} else if !ok && i != 0 {
				t.Errorf("server %d holds bucketless key %q", i, k)
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	dump := func(s Store, start, end []byte) string {
		var sb strings.Builder
		if err := s.Scan(start, end, func(k, v []byte) bool { fmt.Fprintf(&sb, "%q=%s,", k, v); return true }); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}
	for lo := 0; lo <= 21; lo++ {
		for hi := lo; hi <= 22; hi++ {
			start, end := BucketRange("agg", lo, hi)
			if got, want := dump(r, start, end), dump(m, start, end); got != want {
				t.Fatalf("buckets [%d, %d):\n got %s\nwant %s", lo, hi, got, want)
			}
		}
	}
	if got, want := dump(r, nil, nil), dump(m, nil, nil); got != want {
		t.Fatalf("full scan:\n got %s\nwant %s", got, want)
	}
	start, _ := BucketRange("agg", 3, 4)
	if got, want := dump(r, start, nil), dump(m, start, nil); got != want {
		t.Fatalf("open-ended scan:\n got %s\nwant %s", got, want)
	}
}

func TestRemoteErrorsNameTheServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing listens there now
	live := startServers(t, 1)[0]
	r := mustOpenRemote(t, []string{live, dead}, RemoteOptions{Timeout: 2 * time.Second})
	k := StateKey(nil, "agg", 1, "v", []byte("x")) // bucket 1 → the dead server
	_, err = r.MultiGet([][]byte{k})
	if err == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("MultiGet via dead server: %v, want an error naming %s", err, dead)
	}
	if err := r.MultiPut([]KV{{k, []byte("1")}}); err == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("MultiPut via dead server: %v", err)
	}
	// Keys of the live server still work.
	k0 := StateKey(nil, "agg", 0, "v", []byte("x"))
	if err := r.MultiPut([]KV{{k0, []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRemote([]string{"no-port"}, RemoteOptions{Namespace: testNamespace}); err == nil || !strings.Contains(err.Error(), "no-port") {
		t.Fatalf("bad address: %v", err)
	}
	if got := ParseAddrs(" a:1, ,b:2,"); fmt.Sprint(got) != "[a:1 b:2]" {
		t.Fatalf("ParseAddrs = %q", got)
	}
}

func TestRemoteTimeout(t *testing.T) {
	// A listener that accepts and never answers (no HTTP/2 handshake).
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r := mustOpenRemote(t, []string{lis.Addr().String()}, RemoteOptions{Timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err = r.MultiGet(keys("a"))
	if err == nil || !strings.Contains(err.Error(), lis.Addr().String()) {
		t.Fatalf("MultiGet from a silent server: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %s", d)
	}
}

func TestServerListenDefaults(t *testing.T) {
	for in, want := range map[string]string{"": DefaultServerListen, ":7601": "127.0.0.1:7601", "0.0.0.0:1": "0.0.0.0:1"} {
		got, err := serverListenAddr(in)
		if err != nil || got != want {
			t.Errorf("serverListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := serverListenAddr("nonsense"); err == nil {
		t.Error("accepted a listen address without port")
	}
	// A server restarted on the same directory serves the data it had.
	dir := t.TempDir()
	s, err := NewServer(ServerOptions{Dir: dir, Listen: "127.0.0.1:0", Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %s", s.Addr())
	}
	r := mustOpenRemote(t, []string{s.Addr()}, RemoteOptions{})
	if err := r.MultiPut([]KV{{[]byte("k"), []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait after Close: %v", err)
	}
	if _, err := r.MultiGet(keys("k")); err == nil {
		t.Fatal("MultiGet from a stopped server succeeded")
	}
	s2 := startServer(t, dir)
	r2 := mustOpenRemote(t, []string{s2.Addr()}, RemoteOptions{})
	got, err := r2.MultiGet(keys("k"))
	if err != nil || string(got[0]) != "v" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
}

// cutConn passes writes through until limit bytes were written in total,
// writes only the part up to the limit and then closes the connection:
// the client vanishes in the middle of whatever it was sending.
type cutConn struct {
	net.Conn
	left *atomic.Int64
}

func (c *cutConn) Write(p []byte) (int, error) {
	left := c.left.Add(-int64(len(p))) + int64(len(p))
	if left >= int64(len(p)) {
		return c.Conn.Write(p)
	}
	n := 0
	if left > 0 {
		n, _ = c.Conn.Write(p[:left])
	}
	_ = c.Conn.Close()
	return n, errors.New("cutConn: connection cut")
}

// cutDialer cuts the first connection after limit bytes; later ones
// (gRPC reconnecting) pass through.
func cutDialer(limit int64) (func(ctx context.Context, addr string) (net.Conn, error), *atomic.Int32) {
	var dials atomic.Int32
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if dials.Add(1) > 1 {
			return c, nil
		}
		left := new(atomic.Int64)
		left.Store(limit)
		return &cutConn{Conn: c, left: left}, nil
	}, &dials
}

// TestRemoteCutMidBatch cuts the client's connection at many points of a
// large MultiPut (headers, every part of the message, after the whole
// message) and checks, with a fresh client, that the server applied either
// the whole batch or nothing, and that later batches apply normally.
func TestRemoteCutMidBatch(t *testing.T) {
	srv := startServer(t, t.TempDir())
	addr := srv.Addr()
	const nKeys, valLen = 4000, 256 // ~1.1 MB message: many HTTP/2 frames
	batch := func(round int, tag string) []KV {
		kvs := make([]KV, nKeys)
		for i := range kvs {
			v := bytes.Repeat([]byte{byte('a' + round%26)}, valLen)
			copy(v, tag)
			kvs[i] = KV{StateKey(nil, "cut", i%64, "v", []byte(fmt.Sprintf("r%03d-k%05d", round, i))), v}
		}
		return kvs
	}
	checker := mustOpenRemote(t, []string{addr}, RemoteOptions{})
	msgLen := int64(len(mustMarshal(t, &putReq{kvs: batch(0, "x")})))
	var applied, none int
	for round, limit := range []int64{1, 64, 300, 4 << 10, 16 << 10, 64 << 10, 200 << 10, msgLen / 2, msgLen - 100, msgLen + 200, msgLen + 2000, 4 * msgLen} {
		kvs := batch(round, "cut")
		dial, _ := cutDialer(limit)
		c, err := OpenRemote([]string{addr}, RemoteOptions{Namespace: testNamespace, Dialer: dial, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		putErr := c.MultiPut(kvs)
		_ = c.Close()

		ks := make([][]byte, len(kvs))
		for i := range kvs {
			ks[i] = kvs[i].Key
		}
		vals, err := checker.MultiGet(ks)
		if err != nil {
			t.Fatal(err)
		}
		present := 0
		for i, v := range vals {
			if v != nil {
				present++
				if !bytes.Equal(v, kvs[i].Value) {
					t.Fatalf("cut at %d: key %q holds a corrupt value", limit, ks[i])
				}
			}
		}
		switch present {
		case 0:
			none++
		case len(kvs):
			applied++
		default:
			t.Fatalf("cut at %d bytes (message %d): %d of %d keys of the batch present (put err: %v)", limit, msgLen, present, len(kvs), putErr)
		}
		t.Logf("cut at %7d bytes: applied=%v put err=%v", limit, present == len(kvs), putErr)

		// A new client's batch (overwriting the same keys) applies fully.
		next := mustOpenRemote(t, []string{addr}, RemoteOptions{})
		again := batch(round, "new")
		if err := next.MultiPut(again); err != nil {
			t.Fatalf("batch after the cut: %v", err)
		}
		vals, err = checker.MultiGet(ks)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if !bytes.Equal(v, again[i].Value) {
				t.Fatalf("after cut at %d: key %q = %.10q, want the new batch's value", limit, ks[i], v)
			}
		}
	}
	if none == 0 {
		t.Error("no cut left the batch unapplied: the cuts never hit the message")
	}
	t.Logf("batches of %d bytes: %d cuts applied nothing, %d applied everything", msgLen, none, applied)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := marshalState(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRemoteConcurrentShardsAndClose runs calls from several goroutines on
// three servers while Close happens, checking calls after Close fail with
// ErrClosed and nothing races (run with -race).
func TestRemoteConcurrentShardsAndClose(t *testing.T) {
	r := mustOpenRemote(t, startServers(t, 3), RemoteOptions{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := StateKey(nil, "op", (w*7+i)%32, "v", []byte{byte(i)})
				if err := r.MultiPut([]KV{{k, []byte{1}}}); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
				if _, err := r.MultiGet([][]byte{k, StateKey(nil, "op", 3, "v", nil)}); err != nil && !errors.Is(err, ErrClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// replyCutListener wraps the server's connections: the first HTTP/2
// HEADERS frame the server writes (the reply to a unary call, sent only
// after the handler returned) closes the connection instead. The client
// sees its call fail although the server ran it.
type replyCutListener struct{ net.Listener }

func (l replyCutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &replyCutConn{Conn: c}, nil
}

type replyCutConn struct {
	net.Conn
	mu   sync.Mutex
	hdr  []byte // partial frame header
	skip int    // payload bytes of the current frame still to pass
	cut  bool
}

func (c *replyCutConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return 0, errors.New("replyCutConn: cut")
	}
	for rest := p; len(rest) > 0; {
		if c.skip > 0 {
			n := min(c.skip, len(rest))
			c.skip -= n
			rest = rest[n:]
			continue
		}
		n := min(9-len(c.hdr), len(rest))
		c.hdr = append(c.hdr, rest[:n]...)
		rest = rest[n:]
		if len(c.hdr) == 9 {
			if c.hdr[3] == 0x1 { // HEADERS: the reply
				c.cut = true
				_ = c.Conn.Close()
				return 0, errors.New("replyCutConn: cut before the reply")
			}
			c.skip = int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
			c.hdr = c.hdr[:0]
		}
	}
	return c.Conn.Write(p)
}

// TestRemoteReplyLostAfterApply: the server applies a MultiPut, then the
// connection dies before the reply. The client gets an error, and the
// whole batch is there.
func TestRemoteReplyLostAfterApply(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cutSrv, err := NewServer(ServerOptions{Dir: dir, Listener: replyCutListener{lis}, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	kvs := make([]KV, 3000)
	ks := make([][]byte, len(kvs))
	for i := range kvs {
		kvs[i] = KV{StateKey(nil, "lost", i%64, "v", []byte(fmt.Sprintf("k%05d", i))), bytes.Repeat([]byte{'v'}, 200)}
		ks[i] = kvs[i].Key
	}
	c := mustOpenRemote(t, []string{cutSrv.Addr()}, RemoteOptions{Timeout: 5 * time.Second})
	putErr := c.MultiPut(kvs)
	if putErr == nil {
		t.Fatal("MultiPut succeeded although its reply was cut")
	}
	t.Logf("put error: %v", putErr)
	_ = c.Close()
	if err := cutSrv.Close(); err != nil {
		t.Fatal(err)
	}
	// A fresh client, through a normal server on the same directory.
	fresh := mustOpenRemote(t, []string{startServer(t, dir).Addr()}, RemoteOptions{})
	vals, err := fresh.MultiGet(ks)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if !bytes.Equal(v, kvs[i].Value) {
			t.Fatalf("key %q after a lost reply: %q; the batch must be applied whole", ks[i], v)
		}
	}
	if err := fresh.MultiPut([]KV{{ks[0], []byte("next")}}); err != nil {
		t.Fatalf("next batch: %v", err)
	}
}
