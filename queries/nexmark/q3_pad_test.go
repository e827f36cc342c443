package nexmark

import (
	"bytes"
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
)

func TestQ3PersonPad(t *testing.T) {
	ctxWith := func(pad string) dataplane.OperatorContext {
		return dataplane.OperatorContext{Job: control.JobSpec{Params: map[string]string{control.ParamDummyFieldSize: pad}}}
	}
	people := func(pad string) []dataplane.Record {
		fn, err := q3Persons(ctxWith(pad))
		if err != nil {
			t.Fatal(err)
		}
		var out []dataplane.Record
		for id := int64(1); id <= 2; id++ {
			fn(Event{Person: &Person{ID: id, Name: "Kate", City: "Boise", State: "ID"}}, dataplane.Record{},
				func(r dataplane.Record) { out = append(out, r) })
		}
		fn(Event{Person: &Person{ID: 3, Name: "Walt", City: "Phoenix", State: "AZ"}}, dataplane.Record{},
			func(r dataplane.Record) { t.Fatalf("a person in AZ passed: %q", r.Key) })
		return out
	}
	plain, padded := people("0"), people("1000")
	if len(plain) != 2 || len(padded) != 2 {
		t.Fatalf("%d and %d people kept, want 2 each", len(plain), len(padded))
	}
	for i := range plain {
		if got, want := len(padded[i].Value), len(plain[i].Value)+1000; got != want {
			t.Errorf("person %s: %d bytes with the pad, want %d", padded[i].Key, got, want)
		}
		a, err1 := decodeQ3Person(plain[i].Value)
		b, err2 := decodeQ3Person(padded[i].Value)
		if err1 != nil || err2 != nil || a != b {
			t.Errorf("person %s: decoded %+v (%v) and, padded, %+v (%v)", plain[i].Key, a, err1, b, err2)
		}
	}
	// Each person's pad is its own, so the join's state does not compress
	// away.
	if p0, p1 := padded[0].Value[len(plain[0].Value):], padded[1].Value[len(plain[1].Value):]; bytes.Equal(p0, p1) {
		t.Error("two people have the same pad")
	}
	if _, err := q3Persons(ctxWith("-1")); err == nil || !strings.Contains(err.Error(), control.ParamDummyFieldSize) {
		t.Errorf("DummyFieldSize -1: error %v, want one naming the parameter", err)
	}
}
