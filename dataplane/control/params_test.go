package control

import (
	"strconv"
	"strings"
	"testing"
)

func TestStateMigrationChunkSize(t *testing.T) {
	cases := []struct {
		value string // "" = unset
		want  int
		ok    bool
	}{
		{value: "", want: DefaultStateMigrationChunkSize, ok: true},
		{value: "1", want: 1, ok: true},
		{value: "1048576", want: 1048576, ok: true},
		{value: strconv.Itoa(64 << 20), want: 64 << 20, ok: true},
		{value: "0"},
		{value: "-1"},
		{value: strconv.Itoa(64<<20 + 1)},
		{value: "1MB"},
	}
	for _, tc := range cases {
		job := JobSpec{Params: map[string]string{}}
		if tc.value != "" {
			job.Params[ParamStateMigrationChunkSize] = tc.value
		}
		got, err := StateMigrationChunkSize(job)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("%s=%q: %d, %v; want %d", ParamStateMigrationChunkSize, tc.value, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s=%q: accepted as %d, want an error", ParamStateMigrationChunkSize, tc.value, got)
			continue
		}
		for _, part := range []string{"StateMigrationChunkSize", "between 1 and 67108864"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s=%q: error %q does not name %q", ParamStateMigrationChunkSize, tc.value, err, part)
			}
		}
	}
	if DefaultStateMigrationChunkSize != 1048576 {
		t.Errorf("default chunk size %d, want 1 MiB", DefaultStateMigrationChunkSize)
	}
}
