package activities

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/statesvc"
)

// TestDropRemoteState drops one job's state from a real state service and
// checks another job's keys, written under the same operator, bucket and
// key, are untouched.
func TestDropRemoteState(t *testing.T) {
	srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	job := func(id string) control.JobSpec {
		return control.JobSpec{JobID: id, StateBackend: statesvc.BackendRemotePebble,
			Params: map[string]string{control.ParamRemotePebbleAddrs: srv.Addr()}}
	}
	open := func(id string) *statesvc.Remote {
		r, err := statesvc.OpenRemote([]string{srv.Addr()}, statesvc.RemoteOptions{Namespace: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	count := func(r *statesvc.Remote) int {
		n := 0
		if err := r.Scan(nil, nil, func(_, _ []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	done, other := open("job-1"), open("job-10")
	var kvs []statesvc.KV
	for b := 0; b < 16; b++ {
		kvs = append(kvs, statesvc.KV{Key: statesvc.StateKey(nil, "counter", b, "count", []byte("k")), Value: []byte("1")})
	}
	for _, r := range []*statesvc.Remote{done, other} {
		if err := r.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
	}
	a := &Activities{}
	if err := a.DropRemoteState(context.Background(), job("job-1")); err != nil {
		t.Fatal(err)
	}
	if n := count(done); n != 0 {
		t.Errorf("job-1 has %d keys left after DropRemoteState", n)
	}
	if n := count(other); n != len(kvs) {
		t.Errorf("job-10 has %d keys after job-1 was dropped, want %d", n, len(kvs))
	}
	// Jobs on other backends have nothing in the service.
	if err := a.DropRemoteState(context.Background(), control.JobSpec{JobID: "job-10", StateBackend: statesvc.BackendPebble}); err != nil {
		t.Fatal(err)
	}
	if n := count(other); n != len(kvs) {
		t.Errorf("a pebble job's drop touched the service: job-10 has %d keys", n)
	}
	bad := job("job-2")
	bad.Params = nil
	if err := a.DropRemoteState(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "server address") {
		t.Errorf("remote job without servers: %v", err)
	}
}
