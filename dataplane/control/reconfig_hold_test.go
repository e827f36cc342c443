package control

import (
	"strings"
	"testing"
)

func TestReconfigHoldBytes(t *testing.T) {
	cases := []struct {
		v    string
		want int
		ok   bool
	}{
		{"", DefaultReconfigHoldBytes, true},
		{"65536", 64 << 10, true},
		{"4294967296", 4 << 30, true},
		{"65535", 0, false},
		{"4294967297", 0, false},
		{"lots", 0, false},
		{"-1", 0, false},
	}
	for _, c := range cases {
		job := JobSpec{Params: map[string]string{ParamReconfigHoldBytes: c.v}}
		n, err := ReconfigHoldBytes(job)
		if c.ok {
			if err != nil || n != c.want {
				t.Errorf("%q: %d, %v; want %d", c.v, n, err, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q accepted as %d", c.v, n)
		} else if !strings.Contains(err.Error(), ParamReconfigHoldBytes) || !strings.Contains(err.Error(), "65536") {
			t.Errorf("%q: error %q does not name the parameter and its range", c.v, err)
		}
	}
}
