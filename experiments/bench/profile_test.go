package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"koala/experiments"
)

func TestProfileWindow(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	skip := int(experiments.CompareWarmupSec) + 2
	for _, tc := range []struct{ runtime, max, want int }{
		{40, 0, 40 - 1 - skip},
		{40, 10, 10},
		{40, 100, 40 - 1 - skip},
		{skip + 1, 0, 0}, // no window
	} {
		from, secs := profileWindow(start, tc.runtime, tc.max)
		if secs != tc.want || !from.Equal(start.Add(time.Duration(skip)*time.Second)) {
			t.Errorf("profileWindow(runtime %d, max %d) = %s, %d; want +%ds, %d", tc.runtime, tc.max, from, secs, skip, tc.want)
		}
	}
}

// Without a worker serving pprof, --profile stops at once and names the
// stack flag; with one, the others are noted.
func TestNewBenchProfilesEndpoints(t *testing.T) {
	run := t.TempDir()
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	for _, w := range []string{"w1", "w2"} {
		if err := os.WriteFile(filepath.Join(run, "worker-"+w+".pid"), pid, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{RunDir: run, ResultsDir: filepath.Join(t.TempDir(), "results")}
	_, err := newBenchProfiles(o, "s1", true)
	if err == nil || !strings.Contains(err.Error(), "--worker-pprof") || !strings.Contains(err.Error(), "2 running workers") {
		t.Fatalf("no endpoints: err %v, want one naming --worker-pprof and the 2 workers", err)
	}
	if p, err := newBenchProfiles(o, "s2", false); err != nil || p.dir != filepath.Join(o.ResultsDir, "run-s2", "profiles") {
		t.Fatalf("micro only: %+v, %v; want no endpoint needed", p, err)
	}
	if err := os.WriteFile(filepath.Join(run, "worker-w2.pprof"), []byte("127.0.0.1:41237\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := newBenchProfiles(o, "s3", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.endpoints) != 1 || p.endpoints[0].ID != "w2" || len(p.notes) != 1 || !strings.Contains(p.notes[0], "worker w1") {
		t.Fatalf("endpoints %+v notes %q; want w2 profiled and w1 noted", p.endpoints, p.notes)
	}
	if st, err := os.Stat(p.dir); err != nil || !st.IsDir() {
		t.Fatalf("profiles dir %s: %v", p.dir, err)
	}
	o.ProfileSec = -1
	if _, err := newBenchProfiles(o, "s4", true); err == nil || !strings.Contains(err.Error(), "--profile-seconds -1") {
		t.Fatalf("negative --profile-seconds: %v", err)
	}
}
