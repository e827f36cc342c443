package experiments

import (
	"strings"
	"testing"

	"koala/dataplane/metrics"
)

func TestComputeRunMetricsHostCPU(t *testing.T) {
	sink := series(1, 1, 1, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10)
	lag := series(0, 0, 0, 400, 2000, 4000, 6000, 8000, 9000, 5000, 1000, 900, 800, 700, 700, 700)
	// 1.0 core in the warm-up (skipped), 1.8 before the trigger at 6 s, 2.0
	// after it until the input ends at 12 s, 0.5 in the drain after it.
	var busy []metrics.Point
	for sec := 0; sec < 16; sec++ {
		v := 1.0
		switch {
		case sec >= 12:
			v = 0.5
		case sec >= 6:
			v = 2.0
		case sec >= CompareWarmupSec:
			v = 1.8
		}
		busy = append(busy, metrics.Point{Sec: float64(sec) + 0.3, Value: v})
	}
	in := RunSeries{Sink: sink, Lag: lag, Reconfigs: []Interval{{Start: 6, End: 7}}, InputEnd: 12, HostBusy: busy, HostCPUs: 2}
	m := ComputeRunMetrics(in)
	if m.HostCPU == nil || m.HostCPU.Pre == nil || m.HostCPU.After == nil {
		t.Fatalf("host CPU figures %+v, want both windows", m.HostCPU)
	}
	// Before: seconds 3.3..4.3 (5.3 ends past the trigger at 6); after:
	// 6.3..10.3 (11.3 ends past the input's end at 12).
	if *m.HostCPU.Pre != 1.8 || *m.HostCPU.After != 2.0 || m.HostCPU.CPUs != 2 {
		t.Fatalf("host CPU %v / %v of %d, want 1.8 / 2.0 of 2", *m.HostCPU.Pre, *m.HostCPU.After, m.HostCPU.CPUs)
	}
	if got := m.HostCPU.text(); got != "1.80 / 2.00 of 2" {
		t.Errorf("cell %q", got)
	}

	in.HostBusy, in.HostCPUs, in.HostNotMeasured = nil, 0, "read /proc/stat: no such file"
	if got := ComputeRunMetrics(in).HostCPU.text(); got != "not measured (read /proc/stat: no such file)" {
		t.Errorf("unreadable /proc/stat: cell %q", got)
	}
	in.HostNotMeasured = ""
	m = ComputeRunMetrics(in)
	if m.HostCPU != nil || m.HostCPU.text() != "not measured" {
		t.Errorf("unsampled run: %+v, cell %q", m.HostCPU, m.HostCPU.text())
	}

	c := Comparison{Experiment: "x", Rows: []CompareRow{{Protocol: "lazy", Status: StatusOK, RunMetrics: ComputeRunMetrics(RunSeries{
		Sink: sink, Lag: lag, Reconfigs: []Interval{{Start: 6, End: 7}}, InputEnd: 12, HostBusy: busy, HostCPUs: 2})}}}
	if md := c.Markdown(); !strings.Contains(md, "| CPU busy before / after |") || !strings.Contains(md, "| 1.80 / 2.00 of 2 |") {
		t.Errorf("backlog table lacks the CPU column:\n%s", md)
	}
}
