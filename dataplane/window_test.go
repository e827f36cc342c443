package dataplane

import (
	"encoding/binary"
	"fmt"
	"koala/statesvc"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"
)

// keyedDriver runs a keyed operator the way a task does — per batch, the
// state of the batch's keys loaded, the operator called, changes written
// back — over a map store, so operator semantics can be checked against an
// oracle without a cluster.
type keyedDriver struct {
	op    StatefulOperator
	names []string
	store map[string][]byte // state index byte + user key → value
	out   []Record
}

func newKeyedDriver(t *testing.T, f OperatorFactory, inputs ...string) *keyedDriver {
	t.Helper()
	op, err := f(OperatorContext{Spec: specWithInputs(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	sop := op.(StatefulOperator)
	return &keyedDriver{op: sop, names: sop.StateNames(), store: map[string][]byte{}}
}

func (d *keyedDriver) load(keys [][]byte) *State {
	st := newState(d.names, len(keys))
	for _, k := range keys {
		ki := st.addKey(k)
		for i := range d.names {
			st.slotOf(i, ki).value = d.store[string(rune(i))+string(k)]
		}
	}
	return st
}

func (d *keyedDriver) save(st *State) {
	st.written(func(si int, key []byte, sl *stateSlot) {
		slot := string(rune(si)) + string(key)
		if sl.value == nil {
			delete(d.store, slot)
		} else {
			d.store[slot] = sl.value
		}
	})
}

func (d *keyedDriver) emit(r Record) { d.out = append(d.out, r) }

func (d *keyedDriver) batch(t *testing.T, recs []Record) {
	t.Helper()
	var keys [][]byte
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	st := d.load(keys)
	if err := d.op.ProcessKeyed(recs, st, d.emit); err != nil {
		t.Fatal(err)
	}
	d.save(st)
}

func (d *keyedDriver) watermark(t *testing.T, wm int64) {
	t.Helper()
	var keys [][]byte
	if tk, ok := d.op.(TimerKeys); ok {
		keys = tk.DueKeys(wm)
	}
	st := d.load(keys)
	if err := d.op.(WatermarkOperator).OnWatermark(wm, st, d.emit); err != nil {
		t.Fatal(err)
	}
	d.save(st)
}

// rebuild re-derives the operator's timer index from the stored state, as
// a task's first watermark does (syncTimers).
func (d *keyedDriver) rebuild() {
	ix, ok := d.op.(stateIndexer)
	if !ok {
		return
	}
	ix.resetIndex()
	for slot, v := range d.store {
		name := d.names[slot[0]]
		for _, n := range ix.indexedStates() {
			if n == name {
				ix.indexValue(name, []byte(slot[1:]), v)
			}
		}
	}
}

// moveKeys hands the state of keys accepted by which to another driver.
func (d *keyedDriver) moveKeys(to *keyedDriver, which func(key string) bool) {
	for slot, v := range d.store {
		if which(slot[1:]) {
			to.store[slot] = v
			delete(d.store, slot)
		}
	}
	d.rebuild()
	to.rebuild()
}

func countAgg() Aggregator { return CountAggregator{} }

func TestWindowStarts(t *testing.T) {
	cases := []struct {
		spec WindowSpec
		ts   int64
		want []int64
	}{
		{Tumbling(10), 0, []int64{0}},
		{Tumbling(10), 9, []int64{0}},
		{Tumbling(10), 10, []int64{10}},
		{Tumbling(10), -1, []int64{-10}},
		{Sliding(10, 5), 12, []int64{10, 5}},
		{Sliding(10, 5), 10, []int64{10, 5}},
		{Sliding(10, 3), 10, []int64{9, 6, 3}},
		{Sliding(10, 3), 0, []int64{0, -3, -6, -9}},
	}
	for _, c := range cases {
		if got := c.spec.WindowStarts(c.ts); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v starts of %d: %v, want %v", c.spec, c.ts, got, c.want)
		}
	}
}

// TestWindowOracle feeds random, disordered input with late records and
// watermarks to tumbling and sliding windows, moves half the keys to a
// second task half-way (state only: the index is rebuilt from it), and
// checks every watermark fires exactly the windows an oracle says are due.
func TestWindowOracle(t *testing.T) {
	specs := map[string]WindowSpec{
		"tumbling":           Tumbling(100 * time.Millisecond),
		"sliding":            Sliding(100*time.Millisecond, 25*time.Millisecond),
		"sliding-uneven":     Sliding(100*time.Millisecond, 30*time.Millisecond),
		"tumbling-negatives": Tumbling(70 * time.Millisecond),
	}
	for name, spec := range specs {
		for _, migrate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/migrate=%v", name, migrate), func(t *testing.T) {
				runWindowOracle(t, spec, migrate, name == "tumbling-negatives")
			})
		}
	}
}

func runWindowOracle(t *testing.T, spec WindowSpec, migrate, negative bool) {
	f, err := NewWindowFactory(spec, countAgg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newKeyedDriver(t, f), newKeyedDriver(t, f)
	owner := func(key string) *keyedDriver {
		if migrate && statesvc.BucketOf([]byte(key), 2) == 1 {
			return b
		}
		return a
	}
	moved := false
	rng := rand.New(rand.NewPCG(1, 2))
	ms := int64(time.Millisecond)
	var origin int64
	if negative {
		origin = -1000 * ms
	}
	type win struct {
		key   string
		start int64
	}
	pending := map[win]uint64{} // oracle
	fired := map[win]bool{}
	wm := MinWatermark
	maxSeen := MinWatermark
	late := 0
	var batch []Record
	flush := func() {
		// One batch per owner, like routing does.
		byOwner := map[*keyedDriver][]Record{}
		for _, r := range batch {
			d := a
			if moved {
				d = owner(string(r.Key))
			}
			byOwner[d] = append(byOwner[d], r)
		}
		for _, d := range []*keyedDriver{a, b} {
			if len(byOwner[d]) > 0 {
				d.batch(t, byOwner[d])
			}
		}
		batch = nil
	}
	for i := 0; i < 4000; i++ {
		ts := origin + int64(i)*ms + rng.Int64N(60*ms) - 30*ms
		if i%97 == 13 && wm != MinWatermark {
			ts = wm - rng.Int64N(300*ms) // late: at or before the watermark
		}
		if i%500 == 0 {
			ts = origin + int64(i)*ms // on a window boundary
		}
		key := fmt.Sprintf("key-%d", rng.IntN(25))
		r := Record{Key: []byte(key), EventTime: ts}
		batch = append(batch, r)
		if ts <= wm {
			late++
		} else {
			for _, s := range spec.WindowStarts(ts) {
				pending[win{key, s}]++
			}
		}
		maxSeen = max(maxSeen, ts)
		if i%41 == 40 {
			flush()
			next := maxSeen - 50*ms
			if next > wm {
				wm = next
				a.out, b.out = nil, nil
				a.watermark(t, wm)
				b.watermark(t, wm)
				var want []string
				for w, n := range pending {
					if w.start+spec.Size.Nanoseconds()-1 <= wm && !fired[w] {
						fired[w] = true
						want = append(want, fmt.Sprintf("%s=%d", WindowResultKey([]byte(w.key), w.start+spec.Size.Nanoseconds()), n))
					}
				}
				got := resultLines(append(a.out, b.out...))
				sort.Strings(want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("watermark %d: fired\n%v\nwant\n%v", wm, got, want)
				}
			}
		}
		if migrate && !moved && i == 2000 {
			flush()
			a.moveKeys(b, func(k string) bool { return statesvc.BucketOf([]byte(k), 2) == 1 })
			moved = true
		}
	}
	flush()
	a.out, b.out = nil, nil
	a.watermark(t, MaxWatermark)
	b.watermark(t, MaxWatermark)
	var want []string
	for w, n := range pending {
		if !fired[w] {
			want = append(want, fmt.Sprintf("%s=%d", WindowResultKey([]byte(w.key), w.start+spec.Size.Nanoseconds()), n))
		}
	}
	sort.Strings(want)
	if got := resultLines(append(a.out, b.out...)); !reflect.DeepEqual(got, want) {
		t.Fatalf("final watermark fired %d windows, want %d", len(got), len(want))
	}
	var gotLate uint64
	for _, d := range []*keyedDriver{a, b} {
		gotLate += d.op.(CounterReporter).Counters()["late_records"]
		if len(d.store) != 0 {
			t.Fatalf("state left after the final watermark: %d values", len(d.store))
		}
	}
	if gotLate != uint64(late) || late == 0 {
		t.Fatalf("late records counted %d, oracle %d", gotLate, late)
	}
}

func resultLines(recs []Record) []string {
	var out []string
	for _, r := range recs {
		if r.Offset != -1 {
			panic("window result without Offset -1")
		}
		out = append(out, fmt.Sprintf("%s=%d", r.Key, binary.LittleEndian.Uint64(r.Value)))
	}
	sort.Strings(out)
	return out
}

func TestWindowSideOutputForLateRecords(t *testing.T) {
	var side []Record
	spec := Tumbling(10)
	spec.OnLate = func(r Record, emit Emit) { side = append(side, r) }
	f, _ := NewWindowFactory(spec, countAgg)
	d := newKeyedDriver(t, f)
	d.batch(t, []Record{{Key: []byte("a"), EventTime: 5}})
	d.watermark(t, 20)
	d.batch(t, []Record{{Key: []byte("a"), EventTime: 20}, {Key: []byte("a"), EventTime: 21}})
	if len(side) != 1 || side[0].EventTime != 20 {
		t.Fatalf("side output %v, want the record at 20 (≤ watermark)", side)
	}
	if n := d.op.(CounterReporter).Counters()["late_records"]; n != 1 {
		t.Fatalf("late_records %d, want 1", n)
	}
}

func TestWindowSizeParam(t *testing.T) {
	f, err := NewWindowFactory(WindowSpec{Size: time.Second, Slide: 500 * time.Millisecond, SizeParam: "WindowDuration"}, countAgg)
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]time.Duration{"2000": 2 * time.Second, "4s": 4 * time.Second} {
		op, err := f(OperatorContext{Job: jobWithParams(map[string]string{"WindowDuration": v})})
		if err != nil {
			t.Fatal(err)
		}
		w := op.(*windowOperator)
		if w.spec.Size != want || w.spec.Slide != want/2 {
			t.Errorf("WindowDuration %q: size %v slide %v, want %v and %v", v, w.spec.Size, w.spec.Slide, want, want/2)
		}
	}
	if _, err := f(OperatorContext{Job: jobWithParams(map[string]string{"WindowDuration": "soon"})}); err == nil {
		t.Error("WindowDuration \"soon\" accepted")
	}
}
