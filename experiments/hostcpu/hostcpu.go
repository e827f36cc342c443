// Package hostcpu owns what this machine's processors did while a run went
// on: the busy time of /proc/stat, sampled about once a second, and the busy
// cores per second it gives on a run's metric axis.
//
// A scale-out drains a backlog only with cores to spare after it; on a
// machine whose every core was already busy before the trigger, no protocol
// can. The comparison prints these figures beside the backlog so that a run
// shows which case it was in, instead of leaving it to a separate profile.
package hostcpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"koala/dataplane/metrics"
)

// ClockTicks is USER_HZ, 100 on every Linux platform Go supports.
const ClockTicks = 100

// StatPath is where the kernel publishes the CPU counters.
const StatPath = "/proc/stat"

// Sample is the machine's summed busy CPU time at one moment.
type Sample struct {
	At time.Time `json:"at"`
	// Busy is user+nice+system+irq+softirq+steal of all CPUs, in seconds
	// since boot (idle and iowait are not busy).
	Busy float64 `json:"busy_sec"`
}

// Record is what one run sampled: the samples and how many CPUs the
// machine has. Err is set, and Samples empty, where /proc/stat could not be
// read (not Linux, a sandbox without procfs).
type Record struct {
	CPUs    int      `json:"cpus,omitempty"`
	Samples []Sample `json:"samples,omitempty"`
	Err     string   `json:"error,omitempty"`
}

// ParseStat reads the busy seconds of the aggregate "cpu" line of a
// /proc/stat text and counts its "cpuN" lines.
func ParseStat(stat string) (busy float64, cpus int, err error) {
	lines := strings.Split(stat, "\n")
	f := strings.Fields(lines[0])
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("proc stat: first line %q is not the aggregate cpu line (want \"cpu\" and 8 counters)", lines[0])
	}
	var ticks uint64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc stat: counter %d of the cpu line: %w", i+1, err)
		}
		if i != 3 && i != 4 {
			ticks += n
		}
	}
	for _, l := range lines[1:] {
		if name, _, _ := strings.Cut(l, " "); len(name) > 3 && strings.HasPrefix(name, "cpu") {
			if _, err := strconv.Atoi(name[3:]); err == nil {
				cpus++
			}
		}
	}
	return float64(ticks) / ClockTicks, cpus, nil
}

// Read samples the machine now.
func Read() (Sample, int, error) {
	b, err := os.ReadFile(StatPath)
	if err != nil {
		return Sample{}, 0, err
	}
	at := time.Now()
	busy, cpus, err := ParseStat(string(b))
	return Sample{At: at, Busy: busy}, cpus, err
}

// Sampler reads the machine every interval until Stop.
type Sampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	rec  Record
}

// Start begins sampling at once and then every interval (> 0). A machine
// without a readable /proc/stat gives a Record with Err set, not an error:
// the run goes on, and its figures say "not measured".
func Start(interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	first, cpus, err := Read()
	if err != nil {
		s.rec.Err = fmt.Sprintf("read %s: %v", StatPath, err)
		close(s.done)
		return s
	}
	s.rec.CPUs, s.rec.Samples = cpus, []Sample{first}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				smp, _, err := Read()
				s.mu.Lock()
				if err != nil {
					s.rec.Err = fmt.Sprintf("read %s: %v", StatPath, err)
				} else {
					s.rec.Samples = append(s.rec.Samples, smp)
				}
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// Stop ends the sampling (once a last sample is in) and returns the record.
func (s *Sampler) Stop() Record {
	select {
	case <-s.done:
	default:
		if smp, _, err := Read(); err == nil {
			s.mu.Lock()
			s.rec.Samples = append(s.rec.Samples, smp)
			s.mu.Unlock()
		}
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

// ErrNoSamples is returned by Cores for a record with fewer than two samples.
var ErrNoSamples = errors.New("hostcpu: fewer than two samples")

// Cores turns samples into busy cores per interval on a metric axis whose
// zero is origin: one point per pair of consecutive samples, at the
// interval's start, valued busy seconds over wall seconds. Intervals that
// are not forward in time are skipped.
func Cores(samples []Sample, origin time.Time) ([]metrics.Point, error) {
	if len(samples) < 2 {
		return nil, ErrNoSamples
	}
	out := make([]metrics.Point, 0, len(samples)-1)
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		wall := b.At.Sub(a.At).Seconds()
		if wall <= 0 || b.Busy < a.Busy {
			continue
		}
		out = append(out, metrics.Point{Sec: a.At.Sub(origin).Seconds(), Value: (b.Busy - a.Busy) / wall})
	}
	return out, nil
}
