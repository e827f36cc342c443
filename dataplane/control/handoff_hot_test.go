package control

import (
	"strings"
	"testing"
)

// TestHandoffHotBytes: unset is the default, 0 (none) and values inside
// the range are taken, and values outside it or not numbers are refused
// with an error naming the parameter and the range.
func TestHandoffHotBytes(t *testing.T) {
	job := func(v string) JobSpec {
		if v == "" {
			return JobSpec{}
		}
		return JobSpec{Params: map[string]string{ParamHandoffHotBytes: v}}
	}
	if n, err := HandoffHotBytes(job("")); err != nil || n != DefaultHandoffHotBytes {
		t.Fatalf("unset: %d, %v; want %d", n, err, DefaultHandoffHotBytes)
	}
	for v, want := range map[string]int{"0": 0, "4096": 4096, "1073741824": MaxHandoffHotBytes} {
		if n, err := HandoffHotBytes(job(v)); err != nil || n != want {
			t.Fatalf("%s: %d, %v; want %d", v, n, err, want)
		}
	}
	for _, bad := range []string{"-1", "1073741825", "hot"} {
		_, err := HandoffHotBytes(job(bad))
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), ParamHandoffHotBytes) || !strings.Contains(err.Error(), "1073741824") {
			t.Errorf("%q: error %q does not name the parameter and its range", bad, err)
		}
	}
}
