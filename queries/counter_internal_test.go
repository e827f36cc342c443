package queries

import (
	"bytes"
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
)

func TestKeyedCounterPadParam(t *testing.T) {
	for _, tc := range []struct {
		value   string
		set     bool
		wantPad int
		wantErr bool
	}{
		{set: false, wantPad: 0},
		{value: "", set: true, wantPad: 0},
		{value: "0", set: true, wantPad: 0},
		{value: "4088", set: true, wantPad: 4088},
		{value: "1048576", set: true, wantPad: MaxCounterPad},
		{value: "1048577", set: true, wantErr: true},
		{value: "-1", set: true, wantErr: true},
		{value: "4KB", set: true, wantErr: true},
	} {
		params := map[string]string{}
		if tc.set {
			params[control.ParamDummyFieldSize] = tc.value
		}
		op, err := newKeyedCounter(dataplane.OperatorContext{Job: control.JobSpec{Params: params}, Spec: control.OperatorSpec{Name: "counter"}})
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "DummyFieldSize") || !strings.Contains(err.Error(), "between 0 and 1048576") {
				t.Errorf("%q: error %v, want one naming DummyFieldSize and 0 to 1048576", tc.value, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.value, err)
			continue
		}
		if got := op.(keyedCounter).pad; got != tc.wantPad {
			t.Errorf("%q: pad %d, want %d", tc.value, got, tc.wantPad)
		}
	}
}

func TestFillCounterPad(t *testing.T) {
	a, b, c := make([]byte, 1001), make([]byte, 1001), make([]byte, 1001)
	fillCounterPad(a, []byte("k0000001"))
	fillCounterPad(b, []byte("k0000001"))
	fillCounterPad(c, []byte("k0000002"))
	if !bytes.Equal(a, b) {
		t.Error("the pad of one key differs between calls")
	}
	if bytes.Equal(a, c) {
		t.Error("two keys have the same pad")
	}
	// Pseudo-random, not a fill: no byte value covers more than a few % of
	// the pad (including the last, partial word).
	counts := map[byte]int{}
	for _, x := range a {
		counts[x]++
	}
	for v, n := range counts {
		if n > 30 {
			t.Errorf("byte %#x appears %d times in 1001", v, n)
		}
	}
	if a[1000] == 0 && a[999] == 0 && a[998] == 0 {
		t.Error("the tail of the pad was left zero")
	}
}
