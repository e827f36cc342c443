package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// workerPIDs reads <runDir>/worker-*.pid.
func workerPIDs(runDir string) []int {
	var pids []int
	for _, w := range workerFiles(runDir) {
		pids = append(pids, w.pid)
	}
	return pids
}

// periodic calls a sampling function at once, then every interval until
// stop; the samplers below share it.
type periodic struct {
	done chan struct{}
	wg   sync.WaitGroup
}

// startPeriodic runs take now and every interval; with takeAtStop, stop
// runs it once more so the last sample is at the end of the window.
func startPeriodic(interval time.Duration, takeAtStop bool, take func()) *periodic {
	p := &periodic{done: make(chan struct{})}
	take()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				if takeAtStop {
					take()
				}
				return
			case <-t.C:
				take()
			}
		}
	}()
	return p
}

func (p *periodic) stop() {
	close(p.done)
	p.wg.Wait()
}

type cpuSampler struct {
	mu      sync.Mutex
	samples []CPUSample
	perPID  [][]float64 // per sample, the CPU seconds of each of pids
	ticks   *periodic
}

// startCPUSampler records the summed utime+stime of pids, and apart from
// it that of producerPIDs, every interval. A process that cannot be read
// counts its last value (a worker that exited used no more CPU).
func startCPUSampler(pids, producerPIDs []int, interval time.Duration) *cpuSampler {
	s := &cpuSampler{}
	all := slices.Concat(pids, producerPIDs)
	last := make([]float64, len(all))
	take := func() {
		var sum, producers float64
		each := make([]float64, len(pids))
		for i, pid := range all {
			if v, err := ProcCPUSeconds(pid); err == nil {
				last[i] = v
			}
			if i < len(pids) {
				sum += last[i]
				each[i] = last[i]
			} else {
				producers += last[i]
			}
		}
		busy, _ := MachineBusySeconds()
		s.mu.Lock()
		s.samples = append(s.samples, CPUSample{At: time.Now(), Seconds: sum, Producer: producers, MachineBusy: busy})
		s.perPID = append(s.perPID, each)
		s.mu.Unlock()
	}
	s.ticks = startPeriodic(interval, true, take)
	return s
}

func (s *cpuSampler) stop() []CPUSample {
	s.ticks.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// only returns the samples (after stop) with Seconds summed over the
// processes of pids whose keep is true, e.g. the workers a run placed
// tasks on.
func (s *cpuSampler) only(keep []bool) []CPUSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.samples)
	for i := range out {
		out[i].Seconds = 0
		for j, v := range s.perPID[i] {
			if keep[j] {
				out[i].Seconds += v
			}
		}
	}
	return out
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

func machineText() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				if len(f) >= 2 {
					if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
						mem = fmt.Sprintf(", %.1f GB RAM", kb/1024/1024)
					}
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
