package bench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
)

// fakeWorkers answers status requests with canned task statuses per worker.
type fakeWorkers map[string][]control.TaskStatus

func (f fakeWorkers) RequestWithContext(_ context.Context, subj string, data []byte) (*nats.Msg, error) {
	for id, tasks := range f {
		if subj != control.WorkerSubject(id, control.VerbStatus) {
			continue
		}
		var env control.Envelope
		if err := json.Unmarshal(data, &env); err != nil || env.JobID != "job-1" {
			return nil, errors.New("bad request")
		}
		body, _ := json.Marshal(control.StatusReply{WorkerID: id, Tasks: tasks})
		reply, _ := json.Marshal(control.Reply{Version: control.Version, Body: body})
		return &nats.Msg{Data: reply}, nil
	}
	return nil, nats.ErrNoResponders
}

// The sampler sums the job's bytes on the task workers' disks and the
// value-cache counters of the operator's tasks only.
func TestStateSampler(t *testing.T) {
	run := t.TempDir()
	for _, f := range []struct {
		path string
		n    int
	}{{"worker-w1/job-1/statefulMapper-0/state/000001.sst", 3000}, {"worker-w2/job-1/statefulMapper-1/state/000002.sst", 2000}, {"worker-w1/job-0/old.sst", 7000}} {
		p := filepath.Join(run, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, f.n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := func(l, h uint64) *control.StateCacheStats {
		return &control.StateCacheStats{Lookups: l, Hits: h, LimitBytes: 32 << 20}
	}
	nc := fakeWorkers{
		"w1": {{TaskID: "source-0", Operator: "source"}, {TaskID: "statefulMapper-0", Operator: "statefulMapper", StateCache: cache(100, 10)}},
		"w2": {{TaskID: "statefulMapper-1", Operator: "statefulMapper", StateCache: cache(50, 5)}, {TaskID: "sink-0", Operator: "sink", StateCache: cache(999, 999)}},
	}
	workers := []workerFile{{"w1", 1}, {"w2", 2}}
	samples := startStateSampler(run, "job-1", "statefulMapper", workers, nc, time.Hour).stop()
	if len(samples) != 2 { // at start and at stop
		t.Fatalf("%d samples", len(samples))
	}
	s := samples[0]
	if s.DiskErr != "" || s.DiskBytes != 5000 || s.Tasks != 2 || s.CacheTasks != 2 || s.Lookups != 150 || s.Hits != 15 || s.LimitBytes != 64<<20 || s.CacheErr != "" {
		t.Errorf("sample %+v; want 5000 B, 2 tasks, 150 lookups, 15 hits, 64 MiB", s)
	}
	// Without NATS, and with a worker that reports no counters.
	s = startStateSampler(run, "job-1", "statefulMapper", workers, nil, time.Hour).stop()[0]
	if s.DiskBytes != 5000 || !strings.Contains(s.CacheErr, "no NATS") {
		t.Errorf("without NATS: %+v", s)
	}
	nc["w2"][0].StateCache = nil
	s = startStateSampler(run, "job-1", "statefulMapper", workers, nc, time.Hour).stop()[0]
	if s.Tasks != 2 || s.CacheTasks != 1 {
		t.Errorf("one task without counters: %+v", s)
	}
	w := StateAtWindow([]StateSample{s, s}, s.At, s.At)
	if w.CacheOK || !strings.Contains(w.CacheErr, "1 of the operator's 2 tasks report no value-cache counters") {
		t.Errorf("window over samples without every task's counters: %+v", w)
	}
	// A job whose directory is not there (yet) has no bytes, and no error.
	if s := startStateSampler(run, "job-9", "statefulMapper", workers, nc, time.Hour).stop()[0]; s.DiskErr != "" || s.DiskBytes != 0 {
		t.Errorf("missing job directory: %+v", s)
	}
}

func TestStateAtWindow(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	var ss []StateSample
	for sec := 0; sec <= 10; sec++ {
		ss = append(ss, StateSample{At: at(float64(sec)), DiskBytes: float64(1000 * sec), Tasks: 1, CacheTasks: 1, Lookups: uint64(100 * sec), Hits: uint64(10 * sec), LimitBytes: 500})
	}
	w := StateAtWindow(ss, at(2.5), at(8.5))
	if !w.DiskOK || w.DiskBytes != 2500 || !w.CacheOK || w.Lookups != 600 || w.Hits != 60 || w.LimitBytes != 500 {
		t.Fatalf("window %+v", w)
	}
	// Outside the samples: nothing is made up.
	w = StateAtWindow(ss, at(-1), at(12))
	if w.DiskOK || w.CacheOK || w.DiskErr == "" || w.CacheErr == "" {
		t.Errorf("window outside the samples: %+v", w)
	}
	// Counters that went backwards (a store replaced) are not read.
	ss[9].Lookups = 0
	if w := StateAtWindow(ss, at(2), at(9)); w.CacheOK {
		t.Errorf("lookups fell over the window, still read: %+v", w)
	}
}
