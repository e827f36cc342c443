package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"koala/experiments/runner"
)

// The state a measured run works on: a large-state row must show that its
// state was as large as it claims when the window opened, and that its
// reads went past the tasks' value caches. A sampler reads, every second
// of the run, the bytes under the job's data directories on the task
// workers (<run-dir>/worker-<id>/<job>/: Pebble sstables and logs) and,
// over NATS, the value-cache counters of the reported operator's tasks
// (their status); StateAtWindow reads both at the window's bounds.

// natsRequester is the NATS request a sampler makes (*nats.Conn).
type natsRequester = runner.NATSRequester

// StateSample is one reading of a run's state.
type StateSample struct {
	At        time.Time `json:"at"`
	DiskBytes float64   `json:"disk_bytes"`
	DiskErr   string    `json:"disk_error,omitempty"`
	// The operator's tasks found on the task workers (Tasks), those of
	// them that reported value-cache counters (CacheTasks), and their
	// summed counters.
	Tasks      int    `json:"tasks"`
	CacheTasks int    `json:"cache_tasks"`
	Lookups    uint64 `json:"lookups"`
	Hits       uint64 `json:"hits"`
	LimitBytes int64  `json:"limit_bytes"`
	CacheErr   string `json:"cache_error,omitempty"`
}

type stateSampler struct {
	mu      sync.Mutex
	samples []StateSample
	ticks   *periodic
}

// startStateSampler samples job's state every interval until stop. nc nil
// leaves the cache counters unread (said in each sample).
func startStateSampler(runDir, jobID, operator string, workers []workerFile, nc natsRequester, interval time.Duration) *stateSampler {
	s := &stateSampler{}
	dirs := make([]string, len(workers))
	for i, w := range workers {
		dirs[i] = filepath.Join(runDir, "worker-"+w.name, jobID)
	}
	take := func() {
		smp := StateSample{At: time.Now()}
		if n, err := dirBytes(dirs); err != nil {
			smp.DiskErr = err.Error()
		} else {
			smp.DiskBytes = float64(n)
		}
		smp.readCaches(nc, jobID, operator, workers)
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
	}
	s.ticks = startPeriodic(interval, true, take)
	return s
}

func (s *stateSampler) stop() []StateSample {
	s.ticks.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// readCaches sums the value-cache counters of the operator's tasks.
func (smp *StateSample) readCaches(nc natsRequester, jobID, operator string, workers []workerFile) {
	if nc == nil {
		smp.CacheErr = "no NATS connection to ask the workers"
		return
	}
	for _, w := range workers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := runner.WorkerStatus(ctx, nc, jobID, w.name, nil)
		cancel()
		if err != nil {
			smp.CacheErr = err.Error()
			return
		}
		for _, t := range st.Tasks {
			if t.Operator != operator {
				continue
			}
			smp.Tasks++
			if c := t.StateCache; c != nil {
				smp.CacheTasks++
				smp.Lookups += c.Lookups
				smp.Hits += c.Hits
				smp.LimitBytes += c.LimitBytes
			}
		}
	}
}

// StateWindow is a run's state over its window: bytes on disk at its
// start, and what the value caches did from start to end.
type StateWindow struct {
	DiskOK    bool    `json:"disk_ok"`
	DiskBytes float64 `json:"disk_bytes"` // at the window's start
	DiskErr   string  `json:"disk_error,omitempty"`
	CacheOK   bool    `json:"cache_ok"`
	Lookups   float64 `json:"lookups"` // over the window
	Hits      float64 `json:"hits"`
	// LimitBytes is the value caches' summed capacity at the start.
	LimitBytes float64 `json:"limit_bytes"`
	CacheErr   string  `json:"cache_error,omitempty"`
}

// HitRate is the share of the window's lookups the caches answered; ok is
// false without lookups.
func (w StateWindow) HitRate() (float64, bool) {
	if !w.CacheOK || w.Lookups <= 0 {
		return 0, false
	}
	return w.Hits / w.Lookups, true
}

// StateAtWindow reads the samples (in time order) at [from, to]: disk
// bytes interpolated at from, cache counters at both bounds. Counters
// count only when every one of the operator's tasks reported them.
func StateAtWindow(samples []StateSample, from, to time.Time) StateWindow {
	var w StateWindow
	var disk, lookups, hits, limit []CPUSample
	diskErr, cacheErr := "no sample", "no sample"
	for _, s := range samples {
		if s.DiskErr == "" {
			disk = append(disk, CPUSample{At: s.At, Seconds: s.DiskBytes})
		} else {
			diskErr = s.DiskErr
		}
		switch {
		case s.CacheErr != "":
			cacheErr = s.CacheErr
		case s.Tasks == 0:
			cacheErr = "no task of the operator found on the task workers"
		case s.CacheTasks < s.Tasks:
			cacheErr = fmt.Sprintf("%d of the operator's %d tasks report no value-cache counters (no Pebble value cache, or workers started from a koala without them: koala stack down, then up)", s.Tasks-s.CacheTasks, s.Tasks)
		default:
			lookups = append(lookups, CPUSample{At: s.At, Seconds: float64(s.Lookups)})
			hits = append(hits, CPUSample{At: s.At, Seconds: float64(s.Hits)})
			limit = append(limit, CPUSample{At: s.At, Seconds: float64(s.LimitBytes)})
		}
	}
	if v, ok := CPUAt(disk, from); ok {
		w.DiskOK, w.DiskBytes = true, v
	} else {
		w.DiskErr = "no disk reading around the window's start (last: " + diskErr + ")"
	}
	l0, ok0 := CPUAt(lookups, from)
	l1, ok1 := CPUAt(lookups, to)
	h0, _ := CPUAt(hits, from)
	h1, _ := CPUAt(hits, to)
	c, okc := CPUAt(limit, from)
	if ok0 && ok1 && okc && l1 >= l0 && h1 >= h0 {
		w.CacheOK, w.Lookups, w.Hits, w.LimitBytes = true, l1-l0, h1-h0, c
	} else {
		w.CacheErr = "no value-cache counters around the window's bounds (last: " + cacheErr + ")"
	}
	return w
}
