package workflows

import (
	"strconv"
	"strings"
	"testing"

	"koala/dataplane/control"
)

// TestValidateInputStateMigrationChunkSize: a run whose
// StateMigrationChunkSize is outside 1 byte to 64 MiB fails before it
// starts anything, with an error naming the parameter and the range.
func TestValidateInputStateMigrationChunkSize(t *testing.T) {
	cases := []struct {
		value string
		ok    bool
	}{
		{value: "0"},
		{value: "-1"},
		{value: strconv.Itoa(64<<20 + 1)},
		{value: "1", ok: true},
		{value: "1048576", ok: true},
		{value: strconv.Itoa(64 << 20), ok: true},
	}
	for _, tc := range cases {
		in := ExperimentInput{QueryName: "q", TotalRuntimeSeconds: 10, KafkaBrokers: []string{"k:9092"},
			Params: map[string]string{control.ParamStateMigrationChunkSize: tc.value}}
		err := validateInput(in)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.value, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "StateMigrationChunkSize") || !strings.Contains(err.Error(), "between 1 and 67108864")):
			t.Errorf("%s: %v, want an error naming StateMigrationChunkSize and its range", tc.value, err)
		}
	}
}
