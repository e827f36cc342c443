package dataplane

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// ledgerOracle is the sink ledger's verdict computed the plain way: a
// set of (partition, offset) pairs and a map of the highest offset per
// (key, partition).
type ledgerOracle struct {
	seen                      map[[2]int64]bool
	last                      map[string]int64
	distinct, dups, reordered uint64
}

func (o *ledgerOracle) observe(r Record) {
	if r.Offset < 0 {
		return
	}
	at := [2]int64{int64(r.Partition), r.Offset}
	if o.seen[at] {
		o.dups++
		return
	}
	o.seen[at] = true
	o.distinct++
	slot := string(r.Key) + "/" + string(rune(r.Partition))
	if last, ok := o.last[slot]; ok && r.Offset < last {
		o.reordered++
		return
	}
	o.last[slot] = r.Offset
}

// TestSinkLedgerMatchesOracle feeds the ledger records with duplicates,
// reorders and many keys (enough to grow its order table several times)
// and compares every count with the oracle's. The collecting-sink cases
// give the ledger a value table, where it checks order in the keys' slots:
// there keys also come as long keys and records without a value (both
// checked in the ledger's own table), keys show up on several partitions,
// and the order check restarts halfway, as after a checkpoint restore.
func TestSinkLedgerMatchesOracle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keys    int
		n       int
		seed    uint64
		order   bool
		collect bool
	}{
		{"few keys", 3, 2000, 1, true, false},
		{"many keys", 50_000, 200_000, 2, true, false},
		{"no order check", 1000, 20_000, 3, false, false},
		{"collecting sink, few keys", 3, 2000, 4, true, true},
		{"collecting sink, many keys", 50_000, 200_000, 5, true, true},
		{"collecting sink, no order check", 1000, 20_000, 6, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 9))
			var values *keyValues
			if tc.collect {
				values = newKeyValues()
			}
			l := newSinkLedger(tc.order, values)
			o := &ledgerOracle{seen: map[[2]int64]bool{}, last: map[string]int64{}}
			maxValue := map[string]uint64{}
			next := map[int32]int64{}
			var batch []Record
			var sent []Record
			flush := func() {
				l.observe(batch)
				for _, b := range batch {
					o.observe(b)
					if len(b.Value) >= 8 {
						maxValue[string(b.Key)] = max(maxValue[string(b.Key)], binary.LittleEndian.Uint64(b.Value))
					}
				}
				batch = batch[:0]
			}
			restarted := false
			for range tc.n {
				var r Record
				switch x := rng.IntN(100); {
				case x < 3 && len(sent) > 0: // a duplicate
					r = sent[rng.IntN(len(sent))]
				case x < 6 && len(sent) > 0: // an old record arriving late: a reorder unless its key moved on
					r = sent[rng.IntN(len(sent))]
					p := r.Partition
					r.Offset = next[p]
					next[p]++
					// Swap it behind: record a later offset of its key first.
					later := r
					later.Offset = next[p]
					next[p]++
					batch = append(batch, later)
					sent = append(sent, later)
				default:
					p := int32(rng.IntN(4))
					r = Record{Key: binary.BigEndian.AppendUint64(nil, uint64(rng.IntN(tc.keys))), Partition: p, Offset: next[p]}
					next[p]++
					if tc.collect && rng.IntN(20) == 0 {
						r.Key = append(r.Key, "-a-longer-key"...)
					}
					if tc.collect && rng.IntN(20) != 0 {
						r.Value = binary.LittleEndian.AppendUint64(nil, rng.Uint64N(1000))
					}
				}
				if rng.IntN(50) == 0 {
					r.Offset = -1 // a record without a source offset
				}
				batch = append(batch, r)
				sent = append(sent, r)
				if len(batch) >= 100 {
					flush()
				}
				if !restarted && len(sent) >= tc.n/2 {
					restarted = true
					flush()
					l.mu.Lock()
					l.restartOrder()
					l.mu.Unlock()
					clear(o.last)
				}
			}
			flush()
			if tc.collect {
				got := values.snapshot()
				if len(got) != len(maxValue) {
					t.Errorf("values hold %d keys; oracle %d", len(got), len(maxValue))
				}
				for k, v := range maxValue {
					if got[k] != v {
						t.Errorf("value of %q = %d; oracle %d", k, got[k], v)
						break
					}
				}
			}
			_, distinct, dups := l.counts()
			reordered, checked := l.reorders()
			if distinct != o.distinct || dups != o.dups {
				t.Errorf("distinct %d, duplicated %d; oracle %d, %d", distinct, dups, o.distinct, o.dups)
			}
			if checked != tc.order {
				t.Errorf("order checked = %v, want %v", checked, tc.order)
			}
			if tc.order && reordered != o.reordered {
				t.Errorf("reordered %d; oracle %d", reordered, o.reordered)
			}
			if tc.order && o.reordered == 0 {
				t.Fatal("the input has no reorder: the test checks nothing")
			}
		})
	}
}

// BenchmarkSinkLedger is a sink's ledger under the hello row's input:
// 100 K keys over 4 partitions in batches of 1000, order checked; the
// collect variants are a collecting sink's (the counter's): its ledger
// also keeps each key's latest value, and checks order in that table;
// collect-apart is how a collecting sink worked before the two shared a
// table: the ledger, then keyValues.observe on its own table.
func BenchmarkSinkLedger(b *testing.B) {
	for _, keys := range []int{100_000, 10_000_000} {
		for _, mode := range []string{"", "collect", "collect-apart"} {
			name := map[int]string{100_000: "100K-keys", 10_000_000: "10M-keys"}[keys]
			if mode != "" {
				name += "/" + mode
			}
			b.Run(name, func(b *testing.B) { benchSinkLedger(b, keys, mode) })
		}
	}
}

func benchSinkLedger(b *testing.B, keys int, mode string) {
	rng := rand.New(rand.NewPCG(4, 4))
	value := binary.LittleEndian.AppendUint64(nil, 1)
	batches := make([][]Record, 64)
	for i := range batches {
		for range 1000 {
			k := uint64(rng.IntN(keys))
			batches[i] = append(batches[i], Record{Key: binary.BigEndian.AppendUint64(nil, k), Value: value, Partition: int32(k % 4)})
		}
	}
	var next [4]int64
	stamp := func(batch []Record) {
		for j := range batch {
			p := batch[j].Partition
			batch[j].Offset = next[p]
			next[p]++
		}
	}
	var values, apart *keyValues
	switch mode {
	case "collect":
		values = newKeyValues()
	case "collect-apart":
		apart = newKeyValues()
	}
	l := newSinkLedger(true, values)
	observe := func(recs []Record) {
		l.observe(recs)
		if apart != nil {
			apart.observe(recs)
		}
	}
	// Warm: every key seen once, so the tables have their full size.
	warm := make([]Record, 1000)
	for i := 0; i < keys; i += len(warm) {
		for j := range warm {
			k := uint64(i + j)
			warm[j] = Record{Key: binary.BigEndian.AppendUint64(warm[j].Key[:0], k), Value: value, Partition: int32(k % 4)}
		}
		stamp(warm)
		observe(warm)
	}
	b.ResetTimer()
	for i := range b.N {
		batch := batches[i%len(batches)]
		b.StopTimer()
		stamp(batch)
		b.StartTimer()
		observe(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
}

// TestOffsetTable: the order table keeps the highest offset per slot hash
// through growth, refuses a lower one, and stores hash 0 (its free-slot
// mark) like any other.
func TestOffsetTable(t *testing.T) {
	tab := newOffsetTable()
	steps := []struct {
		h    uint64
		off  int64
		want bool
	}{
		{0, 5, true}, {0, 4, false}, {0, 6, true},
		{1 << 40, 3, true}, {1<<40 | 1024, 1, true}, {1 << 40, 2, false}, {1<<40 | 1024, 1, true},
	}
	for i, s := range steps {
		if got := tab.advance(s.h, s.off); got != s.want {
			t.Fatalf("step %d: advance(%#x, %d) = %v, want %v", i, s.h, s.off, got, s.want)
		}
	}
	for h := uint64(2); h < 100_000; h++ {
		tab.advance(h*0x9e3779b97f4a7c15, int64(h))
	}
	if 4*tab.n > 3*len(tab.slots) {
		t.Fatalf("%d entries in %d slots: more than 3/4 full", tab.n, len(tab.slots))
	}
	for h := uint64(2); h < 100_000; h++ {
		if tab.advance(h*0x9e3779b97f4a7c15, int64(h)-1) {
			t.Fatalf("hash %d lost its offset in growth", h)
		}
	}
	if tab.advance(0, 5) {
		t.Fatal("hash 0 lost its offset in growth")
	}
}

// TestSinkLedgerRestartOrder: after a checkpoint restore the records after
// the cut are replayed, with offsets below ones seen before the restore;
// the order check must judge them afresh, in the collecting sink's slots
// as in the ledger's own table.
func TestSinkLedgerRestartOrder(t *testing.T) {
	for _, collect := range []bool{false, true} {
		var values *keyValues
		if collect {
			values = newKeyValues()
		}
		l := newSinkLedger(true, values)
		rec := func(off int64) Record {
			return Record{Key: []byte("k"), Value: binary.LittleEndian.AppendUint64(nil, uint64(off)), Partition: 0, Offset: off}
		}
		l.observe([]Record{rec(10)})
		l.mu.Lock()
		l.restartOrder()
		l.mu.Unlock()
		l.observe([]Record{rec(5), rec(6)})
		if n, _ := l.reorders(); n != 0 {
			t.Errorf("collecting sink %v: %d reordered after the restart, want 0", collect, n)
		}
		l.observe([]Record{rec(4)})
		if n, _ := l.reorders(); n != 1 {
			t.Errorf("collecting sink %v: %d reordered, want 1 (offset 4 after 6)", collect, n)
		}
	}
}
