package runner

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"koala/activities"
	"koala/experiments"
)

// Page cache of a warm-up snapshot.
//
// A run that loads a snapshot links its sstables and reads values from
// them, so whether their pages are in the page cache decides how fast its
// first minutes run. After a 14 GB Section 5.4 sweep, part of the 2.3 GB
// taxi snapshot had left the page cache, taxi's rate probe read its
// batches from disk (60-120 ms against 7-9 ms warm) and stopped at a rate
// the warm pipeline beats, and every protocol then ran at 1.3 × that.
// Reading the snapshot's files once before the probe starts every run of
// a comparison, the probe first, from the same page cache, whatever ran
// on the machine before.

// snapshotCompaction counts the stores of the snapshot in dir and those
// compacted whole when it was taken (control.TaskSnapshot.Compacted); a
// manifest it cannot read counts none.
func snapshotCompaction(dir string) (stores, compacted int) {
	m, err := activities.ReadSnapshotManifest(dir)
	if err != nil {
		return 0, 0
	}
	for _, op := range m.Operators {
		for _, t := range op.Tasks {
			stores++
			if t.Compacted {
				compacted++
			}
		}
	}
	return stores, compacted
}

// readIntoPageCache reads every regular file under dir once, unless they
// add up to more than half the memory the kernel reports available, when
// they would not stay cached (then it reads nothing and says why).
func readIntoPageCache(ctx context.Context, dir string) (experiments.SnapshotRead, error) {
	r := experiments.SnapshotRead{Dir: dir}
	var files []string
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			files = append(files, path)
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("list the warm-up snapshot %s: %w", dir, err)
	}
	r.Stores, r.Compacted = snapshotCompaction(dir)
	if avail, ok := memAvailable(); ok && uint64(total) > avail/2 {
		r.Skipped = fmt.Sprintf("%s of files, more than half the %s of memory available", experiments.BytesText(float64(total)), experiments.BytesText(float64(avail)))
		return r, nil
	}
	start := time.Now()
	buf := make([]byte, 1<<20)
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		n, err := readAll(path, buf)
		r.Bytes += n
		if err != nil {
			return r, fmt.Errorf("read the warm-up snapshot into the page cache: %w", err)
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

func readAll(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for {
		m, err := f.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// memAvailable is /proc/meminfo's MemAvailable in bytes; ok is false where
// there is none (not Linux).
func memAvailable() (uint64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "MemAvailable:"); found {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
