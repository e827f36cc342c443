package traces

import (
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
)

func TestDummyFieldSizeParam(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		err   bool
	}{
		{"", DefaultDummyFieldSize, false},
		{"0", 0, false},
		{"512", 512, false},
		{"-5", 0, true},
		{"15KB", 0, true},
		{"2000000", 0, true},
	} {
		params := map[string]string{}
		if tc.value != "" {
			params[control.ParamDummyFieldSize] = tc.value
		}
		ctx := dataplane.OperatorContext{Job: control.JobSpec{Params: params}}
		got, err := dummyFieldSize(ctx)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "DummyFieldSize") {
				t.Errorf("%q: error %v, want one naming DummyFieldSize", tc.value, err)
			}
			// streamViewers is the twitch operator that holds the pad.
			if _, err := streamViewers(ctx); err == nil {
				t.Errorf("%q: streamViewers accepted it", tc.value)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.value, got, err, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1}, 3}, {[]float64{9, 1, 5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(append([]float64(nil), tc.in...)); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
