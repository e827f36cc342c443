package traces_test

import (
	"fmt"
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/traces"
)

// azureOracle is cpuReadingStats recomputed: per VM the last 80 readings,
// "ts,n,median avg,mean avg,max max" per reading.
func azureOracle(in []traces.CPUReading) []string {
	last := map[string][]traces.CPUReading{}
	var want []string
	for _, r := range in {
		w := lastN(last[r.VMID], r, 80)
		last[r.VMID] = w
		var avg, mx []float64
		for _, x := range w {
			avg, mx = append(avg, x.AvgCPU), append(mx, x.MaxCPU)
		}
		want = append(want, fmt.Sprintf("%s=%d,%d,%.4f,%.4f,%.4f", r.VMID, r.Timestamp, len(w), medianOf(avg), meanOf(avg), maxOf(mx)))
	}
	return want
}

// azureRescale is the operator azure's rescale tests scale.
var azureRescale = rescale{op: "cpuReadingStats", par: map[string]int{"cpuReadingStats": 2}}

func azureInput(t testing.TB, n int) ([]dataplane.Record, []traces.CPUReading) {
	g, err := traces.NewAzureGenerator(control.ProduceRequest{NumKeys: 50, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	recs := generate(t, traces.Azure, 50, 7, n)
	readings := make([]traces.CPUReading, n)
	for i := range readings {
		readings[i] = g.Reading(int64(i))
	}
	return recs, readings
}

// TestAzureAcrossLazyRescale: per-VM statistics stay exact while
// cpuReadingStats is rescaled 2→4 mid-stream.
func TestAzureAcrossLazyRescale(t *testing.T) {
	recs, readings := azureInput(t, 6000)
	res := runRescaled(t, traces.Azure, azureRescale, nil, recs)
	compare(t, res, azureOracle(readings))
}

// TestAzureFromCSV reads the trace from CSV files with malformed lines
// (counted and skipped) and malformed records in Kafka (counted by the
// query).
func TestAzureFromCSV(t *testing.T) {
	_, readings := azureInput(t, 3000)
	good := make([][]byte, len(readings))
	for i, r := range readings {
		good[i] = r.CSV()
	}
	bad := []string{
		"300,vm0000001,1.0,2.0",           // 4 columns
		"soon,vm0000001,1.0,2.0,1.5",      // timestamp not a number
		"300,,1.0,2.0,1.5",                // empty vm id
		"300,vm0000001,1.0,lots,1.5",      // cpu not a number
		"300,vm0000001,1.0,2.0,NaN",       // not a finite number
		"",                                // empty line
		strings.Repeat("9", 70_000),       // longer than a line may be
		"300,vm0000001,1.0,2.0,1.5,extra", // 6 columns
	}
	recs := csvInput(t, traces.Azure, "", good, bad)
	recs, injected := injectBad(recs, []dataplane.Record{
		{Key: []byte("vm0000001"), Value: []byte("garbage")},
		{Key: []byte("vm0000002"), Value: []byte("300,vm0000003,1,2,1.5")}, // key is not the vm id
	})
	res := run(t, traces.Azure, map[string]int{"cpuReadingStats": 2}, nil, recs)
	if n := res.Counter("cpuReadingStats", "malformed_records"); n != uint64(injected) {
		t.Fatalf("cpuReadingStats counted %d malformed records, want %d", n, injected)
	}
	compare(t, res, azureOracle(readings))
}

// BenchmarkAzure reports end-to-end events/s of the azure query.
func BenchmarkAzure(b *testing.B) { benchQuery(b, traces.Azure, 1000, nil) }
