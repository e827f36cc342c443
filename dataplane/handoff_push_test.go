package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/statesvc"
)

const pushBuckets = 64

// newPushPair creates (without starting) two Pebble counter tasks on one
// worker, count-0 holding keys of every bucket, the way a stop-and-restart
// handoff finds them. Frames count-0 sends to count-1 wait in count-1's
// inbox.
func newPushPair(tb testing.TB, keys int) (owner, gainer *task, kvs []statesvc.KV) {
	tb.Helper()
	owner, gainer = newCounterPair(tb, "push", pushBuckets, statesvc.BackendPebble, false, nil)
	// Written in batches, as a task does: most values stay buffered in the
	// store's write-back cache.
	for i := 0; i < keys; i += 1000 {
		var batch []statesvc.KV
		for j := i; j < min(i+1000, keys); j++ {
			k := fmt.Appendf(nil, "key-%d", j)
			batch = append(batch, statesvc.KV{Key: owner.keyed.stateKey("count", k), Value: binary.LittleEndian.AppendUint64(nil, uint64(j))})
		}
		if err := owner.keyed.store.MultiPut(batch); err != nil {
			tb.Fatal(err)
		}
		kvs = append(kvs, batch...)
	}
	return owner, gainer, kvs
}

// pushHalf pushes the upper half of the buckets from owner to gainer and
// applies every frame on gainer as its task goroutine would, concurrently.
func pushHalf(tb testing.TB, owner, gainer *task) {
	tb.Helper()
	var moved []int
	for b := pushBuckets / 2; b < pushBuckets; b++ {
		moved = append(moved, b)
	}
	ctx := context.Background()
	me := control.TaskRef{ID: owner.id, WorkerID: "w1"}
	target := control.TaskRef{ID: gainer.id, WorkerID: "w1"}
	applied := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case f := <-gainer.inbox:
				gainer.taken(f) // as nextFrame does: the frame leaves the inbox
				if err := gainer.installKLT(f); err != nil {
					applied <- err
					return
				}
			case <-done:
				for {
					select {
					case f := <-gainer.inbox:
						gainer.taken(f) // as nextFrame does: the frame leaves the inbox
						if err := gainer.installKLT(f); err != nil {
							applied <- err
							return
						}
					default:
						applied <- nil
						return
					}
				}
			}
		}
	}()
	_, err := owner.pushBuckets(ctx, target, moved, me, "r1")
	close(done)
	if err != nil {
		tb.Fatal(err)
	}
	if err := <-applied; err != nil {
		tb.Fatal(err)
	}
}

// TestBulkPushMovesBuckets: a push moves every value of the given buckets,
// buffered or on disk, to the new owner and deletes them on the old one,
// where the other buckets keep theirs; a chunk limit far below the state
// splits it into many frames without losing a key.
func TestBulkPushMovesBuckets(t *testing.T) {
	for _, chunk := range []int{control.DefaultStateMigrationChunkSize, 4 << 10} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			owner, gainer, kvs := newPushPair(t, 20_000)
			owner.keyed.chunkBytes = chunk
			// Some values on disk, newer ones of some keys buffered over them.
			if err := owner.keyed.store.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(kvs); i += 3 {
				kvs[i].Value = binary.LittleEndian.AppendUint64(nil, uint64(i)+1_000_000)
			}
			var rewrite []statesvc.KV
			for i := 0; i < len(kvs); i += 3 {
				rewrite = append(rewrite, kvs[i])
			}
			if err := owner.keyed.store.MultiPut(rewrite); err != nil {
				t.Fatal(err)
			}
			pushHalf(t, owner, gainer)
			keys := make([][]byte, len(kvs))
			for i, kv := range kvs {
				keys[i] = kv.Key
			}
			onOwner, err := owner.keyed.store.MultiGet(keys)
			if err != nil {
				t.Fatal(err)
			}
			onGainer, err := gainer.keyed.store.MultiGet(keys)
			if err != nil {
				t.Fatal(err)
			}
			moved := 0
			for i, kv := range kvs {
				_, b, _, _, _ := statesvc.ParseStateKey(kv.Key)
				here, there := onOwner[i], onGainer[i]
				if b >= pushBuckets/2 {
					here, there = there, here
					moved++
				}
				if string(here) != string(kv.Value) || there != nil {
					t.Fatalf("key %q of bucket %d: %x where it belongs, %x on the other task; want %x there only", kv.Key, b, here, there, kv.Value)
				}
			}
			if got := gainer.keyed.keysFetched.Load(); got != uint64(moved) {
				t.Errorf("new owner counted %d keys moved, want %d", got, moved)
			}
		})
	}
}

// TestApplyPushedRejectsForeignKeys: a chunk holding a key of another
// operator, or malformed lengths, fails the install instead of planting
// state no route leads to.
func TestApplyPushedRejectsForeignKeys(t *testing.T) {
	_, gainer, _ := newPushPair(t, 0)
	pack := func(k, v []byte) []byte {
		b := binary.AppendUvarint(nil, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		return append(b, v...)
	}
	for name, packed := range map[string][]byte{
		"other operator":  pack(statesvc.StateKey(nil, "other", 3, "count", []byte("k")), []byte("v")),
		"earlier bucket":  pack(statesvc.StateKey(nil, "count", 1, "count", []byte("k")), []byte("v")),
		"length past end": append(binary.AppendUvarint(nil, 99), 'x'),
	} {
		r := Record{Key: packed, Partition: 2, Offset: kltStateOffset}
		if err := gainer.keyed.applyPushed(&r, "count-0"); err == nil {
			t.Errorf("%s: chunk accepted", name)
		}
	}
}

// BenchmarkBulkPush moves half of 100 K keyed-counter values (8-byte
// values, most still buffered in the old owner's write-back cache) from
// one Pebble task to another on the same worker, as a stop-and-restart
// handoff does, and reports the rate in the units koala compare uses
// (user key and value bytes).
func BenchmarkBulkPush(b *testing.B) {
	var moved uint64
	var took time.Duration
	for range b.N {
		b.StopTimer()
		owner, gainer, _ := newPushPair(b, 100_000)
		b.StartTimer()
		start := time.Now()
		pushHalf(b, owner, gainer)
		took += time.Since(start)
		moved += gainer.keyed.bytesMoved.Load()
	}
	b.ReportMetric(float64(moved)/1e6/took.Seconds(), "MB/s")
}

// BenchmarkBulkPushSides times the two sides of BenchmarkBulkPush's move
// apart, in process CPU (garbage collection included) per key moved: the
// old owner's move-out and packing of 50 K counter values (most buffered
// in its write-back cache), and the new owner's install of the packed
// chunk. On 2 cores the two sides of a stop-and-restart pair share one
// core, so their sum bounds the move's rate.
func BenchmarkBulkPushSides(b *testing.B) {
	benchPushSides(b, func(tb testing.TB) (owner, gainer *task) {
		owner, gainer, _ = newPushPair(tb, 100_000)
		return owner, gainer
	})
}

// BenchmarkBulkPushFromDisk is BenchmarkBulkPushSides over state the old
// owner holds in Pebble, not in its write-back cache, as after loading a
// warm-up snapshot: 200 K keys of 350-byte values (borg's jobEventStats
// keeps about that per key), flushed to sstables before the move.
func BenchmarkBulkPushFromDisk(b *testing.B) {
	benchPushSides(b, func(tb testing.TB) (owner, gainer *task) {
		owner, gainer = newCounterPair(tb, "push", pushBuckets, statesvc.BackendPebble, false, nil)
		val := make([]byte, 350)
		for i := 0; i < 200_000; i += 1000 {
			var batch []statesvc.KV
			for j := i; j < i+1000; j++ {
				binary.LittleEndian.PutUint64(val, uint64(j))
				k := fmt.Appendf(nil, "key-%d", j)
				batch = append(batch, statesvc.KV{Key: owner.keyed.stateKey("count", k), Value: slices.Clone(val)})
			}
			if err := owner.keyed.store.MultiPut(batch); err != nil {
				tb.Fatal(err)
			}
		}
		if err := owner.keyed.store.(*statesvc.Pebble).Flush(); err != nil {
			tb.Fatal(err)
		}
		return owner, gainer
	})
}

func benchPushSides(b *testing.B, pair func(testing.TB) (owner, gainer *task)) {
	var out, in int64
	keys := 0
	for range b.N {
		b.StopTimer()
		owner, gainer := pair(b)
		b.StartTimer()
		ks := owner.keyed
		start, end := statesvc.BucketRange(ks.opName, pushBuckets/2, pushBuckets)
		var chunks [][]byte
		t0 := processCPU()
		err := statesvc.MoveOutPacked(ks.store, start, end, control.DefaultStateMigrationChunkSize, func(chunk []byte) error {
			chunks = append(chunks, chunk)
			return nil
		})
		t1 := processCPU()
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range chunks {
			r := Record{Key: c, Partition: pushBuckets / 2, Offset: kltStateOffset}
			if err := gainer.keyed.applyPushed(&r, owner.id); err != nil {
				b.Fatal(err)
			}
		}
		keys += int(gainer.keyed.keysFetched.Load())
		out += t1 - t0
		in += processCPU() - t1
	}
	b.ReportMetric(float64(out)/float64(keys), "old-owner-cpu-ns/key")
	b.ReportMetric(float64(in)/float64(keys), "new-owner-cpu-ns/key")
}
