package nexmark

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
)

// mapperStep runs advanceSeller for one closed auction against state (by
// seller), as the operator does against the keyed state.
func mapperStep(t *testing.T, state map[int64][]byte, seller, price int64, pad int) float64 {
	t.Helper()
	old := state[seller]
	before := bytes.Clone(old)
	next, avg, err := advanceSeller(old, seller, price, pad)
	if err != nil {
		t.Fatalf("seller %d price %d: %v", seller, price, err)
	}
	if !bytes.Equal(old, before) {
		t.Fatalf("seller %d: the stored state was modified in place", seller)
	}
	state[seller] = next
	return avg
}

// TestQ6ModArtifactInput feeds the artifact's fixed test input (eleven
// closed auctions of seller 101 at 100 … 1100, then two of seller 202)
// through the mapper: each output is the average of the seller's last ten
// prices, the eleventh dropping the first.
func TestQ6ModArtifactInput(t *testing.T) {
	type in struct{ seller, price int64 }
	var input []in
	for p := int64(100); p <= 1100; p += 100 {
		input = append(input, in{101, p})
	}
	input = append(input, in{202, 500}, in{202, 600})
	want := []float64{100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 650, 500, 550}
	for _, pad := range []int{0, 2048} {
		state := map[int64][]byte{}
		for i, r := range input {
			if got := mapperStep(t, state, r.seller, r.price, pad); got != want[i] {
				t.Errorf("pad %d: output %d (seller %d, price %d) = %v, want %v", pad, i, r.seller, r.price, got, want[i])
			}
		}
	}
}

// TestQ6ModStateSizeFixed: a seller's state is 88 + DummyFieldSize bytes
// from its first closed auction on, however many follow, and its pad is
// written once.
func TestQ6ModStateSizeFixed(t *testing.T) {
	for _, pad := range []int{0, 7, 2048} {
		state := map[int64][]byte{}
		mapperStep(t, state, 1001, 500, pad)
		padBytes := bytes.Clone(state[1001][q6ModHead:])
		for i := range int64(1000) {
			mapperStep(t, state, 1001, 100+i, pad)
			if got, want := len(state[1001]), Q6ModStateBytes(pad); got != want {
				t.Fatalf("pad %d: after %d closed auctions the state is %d bytes, want %d", pad, i+2, got, want)
			}
		}
		if !bytes.Equal(state[1001][q6ModHead:], padBytes) {
			t.Errorf("pad %d: the pad changed after the first closed auction", pad)
		}
		if n := binary.LittleEndian.Uint64(state[1001]); n != 1001 {
			t.Errorf("pad %d: count %d, want 1001", pad, n)
		}
	}
	if got := Q6ModStateBytes(2048); got != 2136 {
		t.Errorf("Q6ModStateBytes(2048) = %d, want 8 + 10·8 + 2048 = 2136", got)
	}
	// The pad is the seller's: the same whichever task builds it, and not
	// a constant Pebble could compress away.
	a, _, _ := advanceSeller(nil, 1001, 1, 64)
	b, _, _ := advanceSeller(nil, 1001, 2, 64)
	c, _, _ := advanceSeller(nil, 1002, 1, 64)
	if !bytes.Equal(a[q6ModHead:], b[q6ModHead:]) || bytes.Equal(a[q6ModHead:], c[q6ModHead:]) {
		t.Error("the pad is not a function of the seller alone")
	}
}

// TestAdvanceSeller covers the state transitions one at a time.
func TestAdvanceSeller(t *testing.T) {
	// stored builds a state with count n and the given ring, padded by pad.
	stored := func(n uint64, ring []int64, pad int) []byte {
		v := make([]byte, q6ModHead+pad)
		binary.LittleEndian.PutUint64(v, n)
		for i, p := range ring {
			binary.LittleEndian.PutUint64(v[8+8*i:], uint64(p))
		}
		return v
	}
	ten := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for _, tc := range []struct {
		name     string
		old      []byte
		price    int64
		pad      int
		wantAvg  float64
		wantLen  int
		wantRing []int64
		wantN    uint64
		wantErr  string
	}{
		{name: "first closed auction", price: 700, pad: 16, wantAvg: 700, wantLen: q6ModHead + 16, wantRing: []int64{700}, wantN: 1},
		{name: "second averages two", old: stored(1, []int64{700}, 16), price: 100, pad: 16, wantAvg: 400, wantLen: q6ModHead + 16, wantRing: []int64{700, 100}, wantN: 2},
		{name: "tenth fills the ring", old: stored(9, ten[:9], 0), price: 100, wantAvg: 55, wantLen: q6ModHead, wantRing: ten, wantN: 10},
		{name: "eleventh replaces the oldest", old: stored(10, ten, 0), price: 210, wantAvg: 75, wantLen: q6ModHead,
			wantRing: []int64{210, 20, 30, 40, 50, 60, 70, 80, 90, 100}, wantN: 11},
		{name: "wraps by count", old: stored(25, ten, 0), price: 1000, wantAvg: 149, wantLen: q6ModHead,
			wantRing: []int64{10, 20, 30, 40, 50, 1000, 70, 80, 90, 100}, wantN: 26},
		{name: "a stored pad keeps its size", old: stored(1, []int64{700}, 32), price: 100, pad: 8, wantAvg: 400, wantLen: q6ModHead + 32, wantRing: []int64{700, 100}, wantN: 2},
		{name: "an empty value is a new seller", old: []byte{}, price: 5, wantAvg: 5, wantLen: q6ModHead, wantRing: []int64{5}, wantN: 1},
		{name: "a truncated state is an error", old: make([]byte, q6ModHead-1), price: 5, wantErr: "87 bytes, want at least 88"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, avg, err := advanceSeller(tc.old, 1001, tc.price, tc.pad)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), SellerWindowState) {
					t.Fatalf("error %v, want one naming %s and %q", err, SellerWindowState, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if avg != tc.wantAvg || len(next) != tc.wantLen {
				t.Fatalf("average %v, %d bytes; want %v, %d bytes", avg, len(next), tc.wantAvg, tc.wantLen)
			}
			if n := binary.LittleEndian.Uint64(next); n != tc.wantN {
				t.Fatalf("count %d, want %d", n, tc.wantN)
			}
			for i, p := range tc.wantRing {
				if got := int64(binary.LittleEndian.Uint64(next[8+8*i:])); got != p {
					t.Fatalf("ring slot %d = %d, want %d", i, got, p)
				}
			}
		})
	}
}

// TestQ6ModDummyFieldSizeParam: the mapper takes its pad from job
// parameter DummyFieldSize and rejects values it cannot use, naming it.
func TestQ6ModDummyFieldSizeParam(t *testing.T) {
	for _, tc := range []struct {
		value   string
		set     bool
		wantPad int
		wantErr bool
	}{
		{wantPad: 0},
		{value: "", set: true, wantPad: 0},
		{value: "2048", set: true, wantPad: 2048},
		{value: "1048576", set: true, wantPad: MaxQ6ModDummyFieldSize},
		{value: "1048577", set: true, wantErr: true},
		{value: "-1", set: true, wantErr: true},
		{value: "2KB", set: true, wantErr: true},
	} {
		params := map[string]string{}
		if tc.set {
			params[control.ParamDummyFieldSize] = tc.value
		}
		op, err := newQ6ModMapper(dataplane.OperatorContext{Job: control.JobSpec{Params: params}, Spec: control.OperatorSpec{Name: "statefulMapper"}})
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "DummyFieldSize") || !strings.Contains(err.Error(), "statefulMapper") {
				t.Errorf("%q: error %v, want one naming statefulMapper and DummyFieldSize", tc.value, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.value, err)
			continue
		}
		if got := op.(*q6ModMapper).pad; got != tc.wantPad {
			t.Errorf("%q: pad %d, want %d", tc.value, got, tc.wantPad)
		}
	}
}

// TestQ6ModRejects: the mapper's input check refuses what is not a closed
// auction keyed by its seller, counting each reason, and accepts the rest.
func TestQ6ModRejects(t *testing.T) {
	op, err := newQ6ModMapper(dataplane.OperatorContext{Spec: control.OperatorSpec{Name: "statefulMapper"}})
	if err != nil {
		t.Fatal(err)
	}
	m := op.(*q6ModMapper)
	good := `{"closedAuction":{"id":1000,"seller":1005,"price":300,"category":10,"dateTime":1}}`
	for _, tc := range []struct {
		key, value, wantErr string
	}{
		{key: "1005", value: good},
		{key: "1006", value: good, wantErr: `record key "1006" is not the closed auction's seller 1005`},
		{key: "01005", value: good, wantErr: "is not the closed auction's seller"},
		{key: "1005", value: `{"bid":{"auction":1000,"bidder":1001,"price":5,"dateTime":1}}`, wantErr: "a bid event"},
		{key: "1005", value: `{"closedAuction":{"id":1000,"seller":1005,"dateTime":1}}`, wantErr: "without id, seller, price or dateTime"},
		{key: "1005", value: `{"closedAuction":`, wantErr: "malformed"},
	} {
		ca, err := m.closedAuction(dataplane.Record{Key: []byte(tc.key), Value: []byte(tc.value)})
		if tc.wantErr == "" {
			if err != nil || ca.Seller != 1005 || ca.Price != 300 {
				t.Errorf("%s %s: %+v, %v", tc.key, tc.value, ca, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s %s: error %v, want %q", tc.key, tc.value, err, tc.wantErr)
		}
	}
	if c := m.Counters(); c["key_not_seller"] != 2 || c["not_closed_auctions"] != 1 {
		t.Errorf("counters %v, want key_not_seller 2, not_closed_auctions 1", c)
	}
}
