package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"koala/experiments/hostcpu"
)

// ProcCPUTicks parses the contents of /proc/<pid>/stat and returns
// utime+stime in clock ticks.
func ProcCPUTicks(stat string) (uint64, error) {
	// The command (field 2) is in parentheses and may contain spaces.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no ')' in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// After ')': state(3) ppid(4) ... utime(14) stime(15); f[0] is field 3.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command, want ≥ 13", len(f))
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat utime: %w", err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat stime: %w", err)
	}
	return u + s, nil
}

// ClockTicks is USER_HZ, 100 on every Linux platform Go supports.
const ClockTicks = hostcpu.ClockTicks

// ProcCPUSeconds reads utime+stime of pid in seconds.
func ProcCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := ProcCPUTicks(string(b))
	if err != nil {
		return 0, err
	}
	return float64(t) / ClockTicks, nil
}

// CPUSample is the summed CPU seconds of a set of processes at one time.
type CPUSample struct {
	At      time.Time `json:"at"`
	Seconds float64   `json:"cpu_seconds"`
	// Producer is the summed CPU seconds of the processes that only run
	// the input generators (workers hosting no task), kept apart from
	// Seconds so the pipeline is not charged for producing its input.
	Producer float64 `json:"producer_cpu_seconds,omitempty"`
	// MachineBusy is the busy time of all CPUs of the machine (/proc/stat:
	// user+nice+system+irq+softirq+steal), in seconds.
	MachineBusy float64 `json:"machine_busy_seconds"`
}

// MachineBusySeconds reads the busy CPU seconds of the whole machine from
// /proc/stat.
func MachineBusySeconds() (float64, error) {
	s, _, err := hostcpu.Read()
	return s.Busy, err
}

// ParseMachineBusy parses the "cpu" line of /proc/stat.
func ParseMachineBusy(stat string) (float64, error) {
	busy, _, err := hostcpu.ParseStat(stat)
	return busy, err
}

// machineAt is CPUAt for the machine-wide busy seconds.
func machineAt(samples []CPUSample, t time.Time) (float64, bool) {
	return fieldAt(samples, t, func(s CPUSample) float64 { return s.MachineBusy })
}

// producerAt is CPUAt for the producer processes' seconds.
func producerAt(samples []CPUSample, t time.Time) (float64, bool) {
	return fieldAt(samples, t, func(s CPUSample) float64 { return s.Producer })
}

// fieldAt is CPUAt over another of the samples' CPU figures.
func fieldAt(samples []CPUSample, t time.Time, field func(CPUSample) float64) (float64, bool) {
	fs := make([]CPUSample, len(samples))
	for i, s := range samples {
		fs[i] = CPUSample{At: s.At, Seconds: field(s)}
	}
	return CPUAt(fs, t)
}

// CPUAt interpolates the CPU seconds at t linearly between the samples
// around it; ok is false when t is outside the sampled span. Samples must
// be in time order.
func CPUAt(samples []CPUSample, t time.Time) (float64, bool) {
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.Before(a.At) || t.After(b.At) {
			continue
		}
		span := b.At.Sub(a.At).Seconds()
		if span <= 0 {
			return a.Seconds, true
		}
		return a.Seconds + (b.Seconds-a.Seconds)*t.Sub(a.At).Seconds()/span, true
	}
	if len(samples) == 1 && t.Equal(samples[0].At) {
		return samples[0].Seconds, true
	}
	return 0, false
}
