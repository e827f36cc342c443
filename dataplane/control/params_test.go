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

func TestTaskInboxMaxRecords(t *testing.T) {
	cases := []struct {
		batch int
		v     string
		want  int
		ok    bool
	}{
		{1000, "", DefaultTaskInboxBatches * 1000, true},
		{0, "", DefaultTaskInboxBatches, true}, // no batch size: batches of one
		{1 << 23, "", MaxTaskInboxMaxRecords, true},
		{1000, "1", 1, true},
		{1000, "4096", 4096, true},
		{1000, "0", 0, false},
		{1000, "16777217", 0, false},
		{1000, "many", 0, false},
	}
	for _, c := range cases {
		job := JobSpec{BatchSize: c.batch, Params: map[string]string{ParamTaskInboxMaxRecords: c.v}}
		n, err := TaskInboxMaxRecords(job)
		if c.ok {
			if err != nil || n != c.want {
				t.Errorf("batch %d, %q: %d, %v; want %d", c.batch, c.v, n, err, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q accepted as %d", c.v, n)
		} else if !strings.Contains(err.Error(), ParamTaskInboxMaxRecords) || !strings.Contains(err.Error(), "16777216") {
			t.Errorf("%q: error %q does not name the parameter and its range", c.v, err)
		}
	}
}
