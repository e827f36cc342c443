package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koala/experiments"
)

// TestReadIntoPageCache: every regular file under the snapshot directory
// is read once, and the comparison's report says so.
func TestReadIntoPageCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q6-snap")
	if err := os.MkdirAll(filepath.Join(dir, "statefulMapper-0", "pebble"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]int{"manifest.json": 100, "statefulMapper-0/pebble/000001.sst": 3 << 20, "statefulMapper-0/task.json": 10}
	want := int64(0)
	for name, n := range files {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		want += int64(n)
	}
	r, err := readIntoPageCache(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != want || r.Skipped != "" {
		t.Fatalf("read %d bytes (skipped %q), want %d", r.Bytes, r.Skipped, want)
	}
	md := experiments.Comparison{Experiment: "q6", Snapshot: &r}.Markdown()
	if !strings.Contains(md, "warm-up snapshot `q6-snap` (3.1 MB) was read into the page cache") {
		t.Fatalf("report does not say the snapshot was read:\n%s", md)
	}
	if _, err := readIntoPageCache(context.Background(), filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing snapshot directory read without error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := readIntoPageCache(ctx, dir); err == nil {
		t.Fatal("a cancelled read returned no error")
	}
}

// TestSnapshotCompactionSaid: the report says whether the snapshot's
// stores were compacted when it was taken, from its manifest, and says
// nothing when the manifest cannot be read.
func TestSnapshotCompactionSaid(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		want     string
	}{
		{"all", `{"operators":[{"tasks":[{"task_id":"a-0","compacted":true},{"task_id":"a-1","compacted":true}]}]}`, "Its stores were compacted whole"},
		{"some", `{"operators":[{"tasks":[{"task_id":"a-0","compacted":true}]},{"tasks":[{"task_id":"b-0"}]}]}`, "1 of its 2 stores were not compacted whole"},
		{"unreadable", `not json`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(tc.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := readIntoPageCache(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			text := r.Text()
			if tc.want == "" {
				if strings.Contains(text, "compacted") {
					t.Fatalf("unreadable manifest, yet the report speaks of compaction: %s", text)
				}
				return
			}
			if !strings.Contains(text, tc.want) {
				t.Fatalf("report %q does not say %q", text, tc.want)
			}
		})
	}
}
