package traces_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries/traces"
)

// TestGenerators: every trace generator is deterministic for a seed, keys
// each record as its query expects, writes lines the trace's file reader
// accepts and concentrates records on a few hot keys (VMs, jobs, routes'
// pickup cells, streams).
func TestGenerators(t *testing.T) {
	const n, numKeys = 20000, 200
	for _, q := range []string{traces.Azure, traces.Borg, traces.Taxi, traces.Twitch} {
		t.Run(q, func(t *testing.T) {
			a := generate(t, q, numKeys, 1, n)
			b := generate(t, q, numKeys, 1, n)
			c := generate(t, q, numKeys, 2, 50)
			same := 0
			for i := range c {
				if bytes.Equal(a[i].Value, c[i].Value) {
					same++
				}
			}
			if same == len(c) {
				t.Error("seeds 1 and 2 give the same records")
			}
			// The file reader accepts every generated line and derives the
			// same key.
			dir := t.TempDir()
			var file bytes.Buffer
			if q == traces.Taxi || q == traces.Twitch {
				file.WriteString("header\n")
			}
			keys := map[string]int{}
			for i := range a {
				if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) {
					t.Fatalf("record %d differs between two generators of one seed", i)
				}
				// Twitch is keyed by user (users take turns); its skew is
				// over the streams they watch.
				k := string(a[i].Key)
				if q == traces.Twitch {
					k = strings.Split(string(a[i].Value), ",")[1]
				}
				keys[k]++
				file.Write(a[i].Value)
				file.WriteByte('\n')
			}
			p := filepath.Join(dir, "in.csv")
			if err := os.WriteFile(p, file.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			back, bad, err := traces.ReadCSV(q, []string{p})
			if err != nil || bad != 0 || len(back) != n {
				t.Fatalf("ReadCSV of generated lines: %d records, %d malformed, %v", len(back), bad, err)
			}
			for i := range back {
				if !bytes.Equal(back[i].Key, a[i].Key) {
					t.Fatalf("line %d: file key %q, generator key %q", i, back[i].Key, a[i].Key)
				}
			}
			top := 0
			for _, k := range keys {
				top = max(top, k)
			}
			if top < 5*n/len(keys) {
				t.Errorf("busiest of %d keys has %d of %d records: not skewed", len(keys), top, n)
			}
		})
	}
}

// TestAzureKeysAreVMs checks the azure generator's key space: NumKeys
// VMs, readings within 0–100 % and min ≤ avg ≤ max.
func TestAzureKeysAreVMs(t *testing.T) {
	g, err := traces.NewAzureGenerator(control.ProduceRequest{NumKeys: 30, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	vms := map[string]bool{}
	for n := int64(0); n < 5000; n++ {
		r := g.Reading(n)
		vms[r.VMID] = true
		if r.MinCPU < 0 || r.MinCPU > r.AvgCPU || r.AvgCPU > r.MaxCPU || r.MaxCPU > 100 {
			t.Fatalf("reading %d: %+v", n, r)
		}
	}
	if len(vms) > 30 || len(vms) < 20 {
		t.Fatalf("%d distinct VMs, want up to 30 (most of them)", len(vms))
	}
}

func TestGeneratorErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.csv")
	if err := os.WriteFile(junk, []byte("a\nb,c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  control.ProduceRequest
		want string
	}{
		{control.ProduceRequest{Generator: traces.Azure, NumKeys: 0}, "NumKeys 0"},
		{control.ProduceRequest{Generator: traces.Taxi, NumKeys: traces.MaxTaxiRoutes + 1}, "NumKeys"},
		{control.ProduceRequest{Generator: traces.Borg, NumKeys: 10, Skew: 11}, "Skew"},
		{control.ProduceRequest{Generator: traces.Twitch, FilePath: []string{filepath.Join(dir, "missing.csv")}}, "FilePath[0]"},
		{control.ProduceRequest{Generator: traces.Azure, FilePath: []string{dir}}, "is a directory"},
		{control.ProduceRequest{Generator: traces.Borg, FilePath: []string{junk}}, "no valid borg record (2 malformed lines"},
		{control.ProduceRequest{Generator: traces.Azure, FilePath: []string{junk, ""}}, "FilePath[1] is empty"},
	} {
		_, err := produce.NewGenerator(tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", tc.req, err, tc.want)
		}
	}
	// A too-long last line without a line ending is counted, not lost.
	tail := filepath.Join(dir, "tail.csv")
	if err := os.WriteFile(tail, []byte("0,vm1,1,2,1.5\n"+strings.Repeat("7", 70_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if recs, bad, err := traces.ReadCSV(traces.Azure, []string{tail}); err != nil || len(recs) != 1 || bad != 1 {
		t.Errorf("ReadCSV with a long unterminated last line: %d records, %d malformed, %v; want 1, 1", len(recs), bad, err)
	}
	if _, _, err := traces.ReadCSV("nexmark", nil); err == nil {
		t.Error("ReadCSV accepted an unknown trace")
	}
}

// TestProduceReportsMalformed: a producer replaying trace files reports
// the lines it skipped.
func TestProduceReportsMalformed(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	p := filepath.Join(t.TempDir(), "twitch.csv")
	lines := "user_id,stream_id,streamer_name,time,event_type\nu1,s1,x,1,ENTER\nu1,s1,x,oops,LEAVE\nu1,s1,x,3,LEAVE\nu2;s1;x;4;ENTER\n"
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := produce.Produce(ctx, control.ProduceRequest{Topic: "trace", KafkaBrokers: kc.ListenAddrs(), Generator: traces.Twitch, FilePath: []string{p}, MaxEvents: 5}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Acked != 5 || rep.Malformed != 2 {
		t.Fatalf("produced %d records with %d malformed lines reported, want 5 and 2", rep.Acked, rep.Malformed)
	}
}
