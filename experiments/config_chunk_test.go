package experiments

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"koala/dataplane/control"
)

// TestStateMigrationChunkSizeKnob: the config rejects chunk sizes outside
// 1 byte to 64 MiB, naming the field and the range, and passes the others
// to the job's Params.
func TestStateMigrationChunkSizeKnob(t *testing.T) {
	cases := []struct {
		value int64
		ok    bool
	}{
		{value: 0},
		{value: -1},
		{value: 64<<20 + 1},
		{value: 1, ok: true},
		{value: 1048576, ok: true},
		{value: 64 << 20, ok: true},
	}
	for _, tc := range cases {
		t.Run(strconv.FormatInt(tc.value, 10), func(t *testing.T) {
			doc := fmt.Sprintf(`{"QueryName":"q","StateMigrationChunkSize":%d}`, tc.value)
			in, err := ParseConfig("c.json", []byte(doc))
			if !tc.ok {
				want := fmt.Sprintf(`field "StateMigrationChunkSize": %d is out of range (must be between 1 and 67108864)`, tc.value)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one containing %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := in.Params[control.ParamStateMigrationChunkSize]; got != strconv.FormatInt(tc.value, 10) {
				t.Fatalf("Params[%s] = %q, want %d", control.ParamStateMigrationChunkSize, got, tc.value)
			}
		})
	}
}
