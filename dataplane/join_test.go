package dataplane

import (
	"fmt"
	"koala/dataplane/wire"
	"koala/statesvc"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"
)

func tagged(side int, key string, ts int64, v string) Record {
	return Record{Key: []byte(key), Value: []byte(v), EventTime: ts, Partition: int32(inputTagBase - side)}
}

func pairJoin(key []byte, l, r Record) (Record, bool) {
	return Record{Key: key, Value: []byte(string(l.Value) + "+" + string(r.Value))}, true
}

func TestInputIndexAndTags(t *testing.T) {
	ins := []string{"persons", "auctions-by-seller"}
	for id, want := range map[string]int{"persons-0": 0, "auctions-by-seller-12": 1, "join-1": -1, "x": -1} {
		if got := inputIndex(ins, id); got != want {
			t.Errorf("inputIndex(%q) = %d, want %d", id, got, want)
		}
	}
	tk := &task{spec: specWithInputs(ins)}
	f := &wire.Frame{FromTask: "auctions-by-seller-3", Records: []Record{{Partition: 2}}}
	if recs := tk.tagInputs(f); InputOf(recs[0]) != 1 {
		t.Fatalf("record from input 1 tagged %d", InputOf(recs[0]))
	}
	// Forwarded by a sibling: the tag stays.
	f = &wire.Frame{FromTask: "op-1", Records: []Record{tagged(0, "k", 1, "")}}
	if recs := tk.tagInputs(f); InputOf(recs[0]) != 0 {
		t.Fatal("forwarded record lost its tag")
	}
	if InputOf(Record{Partition: 3}) != -1 {
		t.Fatal("a Kafka partition read as a tag")
	}
}

// TestJoinOracle joins random left and right records, unwindowed and
// windowed, against a nested-loop oracle (windowed: same tumbling window,
// and late records dropped), moving half the keys to a second task midway.
func TestJoinOracle(t *testing.T) {
	for _, window := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(fmt.Sprintf("window=%v", window), func(t *testing.T) {
			f, err := NewJoinFactory(JoinSpec{Window: window, Join: pairJoin})
			if err != nil {
				t.Fatal(err)
			}
			a, b := newKeyedDriver(t, f, "l", "r"), newKeyedDriver(t, f, "l", "r")
			rng := rand.New(rand.NewPCG(7, 8))
			ms := int64(time.Millisecond)
			type rec struct {
				side int
				key  string
				ts   int64
				v    string
			}
			var kept []rec
			var want []string
			wm, maxSeen := MinWatermark, MinWatermark
			moved := false
			late := 0
			for i := 0; i < 1500; i++ {
				r := rec{side: rng.IntN(2), key: fmt.Sprintf("k%d", rng.IntN(15)), ts: int64(i)*ms + rng.Int64N(20*ms), v: fmt.Sprint(i)}
				if window > 0 && i%61 == 7 && wm != MinWatermark {
					r.ts = wm - rng.Int64N(100*ms)
				}
				d := a
				if moved && statesvc.BucketOf([]byte(r.key), 2) == 1 {
					d = b
				}
				d.batch(t, []Record{tagged(r.side, r.key, r.ts, r.v)})
				maxSeen = max(maxSeen, r.ts)
				if window > 0 && r.ts <= wm {
					late++
					continue
				}
				for _, o := range kept {
					if o.key != r.key || o.side == r.side {
						continue
					}
					if window > 0 && (floorDiv(o.ts, window.Nanoseconds()) != floorDiv(r.ts, window.Nanoseconds()) ||
						floorDiv(o.ts, window.Nanoseconds())*window.Nanoseconds()+window.Nanoseconds()-1 <= wm) {
						continue
					}
					l, rr := o, r
					if r.side == 0 {
						l, rr = r, o
					}
					want = append(want, r.key+"="+l.v+"+"+rr.v)
				}
				kept = append(kept, r)
				if window > 0 && i%50 == 49 {
					if next := maxSeen - 15*ms; next > wm {
						wm = next
						a.watermark(t, wm)
						b.watermark(t, wm)
					}
				}
				if i == 700 {
					a.moveKeys(b, func(k string) bool { return statesvc.BucketOf([]byte(k), 2) == 1 })
					moved = true
				}
			}
			var got []string
			for _, r := range append(a.out, b.out...) {
				got = append(got, string(r.Key)+"="+string(r.Value))
			}
			sort.Strings(got)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) || len(want) == 0 {
				t.Fatalf("joined %d pairs, oracle %d", len(got), len(want))
			}
			var gotLate uint64
			for _, d := range []*keyedDriver{a, b} {
				gotLate += d.op.(CounterReporter).Counters()["late_records"]
			}
			if gotLate != uint64(late) {
				t.Fatalf("late %d, oracle %d", gotLate, late)
			}
			if window > 0 {
				a.watermark(t, MaxWatermark)
				b.watermark(t, MaxWatermark)
				if len(a.store)+len(b.store) != 0 {
					t.Fatalf("windowed join kept %d values after the final watermark", len(a.store)+len(b.store))
				}
			}
		})
	}
}

func TestJoinNeedsTwoInputs(t *testing.T) {
	f, _ := NewJoinFactory(JoinSpec{Join: pairJoin})
	if _, err := f(OperatorContext{Spec: specWithInputs([]string{"one"})}); err == nil {
		t.Fatal("a join with one input was built")
	}
	if _, err := NewJoinFactory(JoinSpec{}); err == nil {
		t.Fatal("a join without a function was accepted")
	}
}
