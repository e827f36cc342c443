package control

import (
	"strings"
	"testing"
	"time"
)

func TestSyntheticCost(t *testing.T) {
	cases := []struct {
		v, op string
		want  time.Duration
		ok    bool
	}{
		{"", "counter", 0, true},
		{"counter=250us", "counter", 250 * time.Microsecond, true},
		{"counter=250us", "sink", 0, true},
		{" counter = 250us , mapper=1ms", "mapper", time.Millisecond, true},
		{"counter=100ms", "counter", 100 * time.Millisecond, true},
		{"counter=101ms", "counter", 0, false},
		{"counter=-1us", "counter", 0, false},
		{"counter", "counter", 0, false},
		{"=1ms", "counter", 0, false},
		{"counter=slow", "counter", 0, false},
		{"counter=1ms,counter=2ms", "counter", 0, false},
		{"counter=1ms,mapper=x", "counter", 0, false}, // a bad entry fails every operator
	}
	for _, c := range cases {
		got, err := SyntheticCost(JobSpec{Params: map[string]string{ParamSyntheticCost: c.v}}, c.op)
		if c.ok {
			if err != nil || got != c.want {
				t.Errorf("%q for %s: %v, %v; want %v", c.v, c.op, got, err, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q for %s accepted as %v", c.v, c.op, got)
		} else if !strings.Contains(err.Error(), ParamSyntheticCost) {
			t.Errorf("%q: error %q does not name the parameter", c.v, err)
		}
	}
}
