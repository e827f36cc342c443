package dataplane

import (
	"log/slog"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/statesvc"
)

type namedStates []string

func (n namedStates) StateNames() []string                          { return n }
func (namedStates) ProcessKeyed(_ []Record, _ *State, _ Emit) error { return nil }

// TestRemoteKeyedStateIsPerJob checks the keyed state of a remote-pebble
// job is shared by its tasks and by no other job, and that a remote job
// without an id is refused.
func TestRemoteKeyedStateIsPerJob(t *testing.T) {
	srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	open := func(jobID string) (*keyedState, error) {
		job := control.JobSpec{JobID: jobID, NumBuckets: 8, StateBackend: statesvc.BackendRemotePebble,
			Params: map[string]string{control.ParamRemotePebbleAddrs: srv.Addr()}}
		ks, err := newKeyedState(namedStates{"count"}, job, "counter", t.TempDir(), nil)
		if err == nil {
			t.Cleanup(func() { _ = ks.store.Close() })
		}
		return ks, err
	}
	if _, err := open(""); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("remote job without id: %v", err)
	}
	task0, err := open("job-a")
	if err != nil {
		t.Fatal(err)
	}
	k := task0.stateKey("count", []byte("k"))
	if err := task0.store.MultiPut([]statesvc.KV{{Key: k, Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		job  string
		want string
	}{{"job-a", "a"}, {"job-b", ""}} {
		ks, err := open(c.job)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ks.store.MultiGet([][]byte{k})
		if err != nil {
			t.Fatal(err)
		}
		if string(got[0]) != c.want {
			t.Errorf("task of %s reads %q written by job-a, want %q", c.job, got[0], c.want)
		}
	}
}
