package experiments

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"koala/dataplane/control"
)

// TestMigrationSizeKnobs: the config rejects state-migration chunk sizes
// and background migration budgets outside their ranges, naming the field
// and the range, and passes the others to the job's Params.
func TestMigrationSizeKnobs(t *testing.T) {
	cases := []struct {
		field    string
		value    int64
		min, max int64
		ok       bool
	}{
		{field: control.ParamStateMigrationChunkSize, value: 0, min: 1, max: control.MaxStateMigrationChunkSize},
		{field: control.ParamStateMigrationChunkSize, value: -1, min: 1, max: control.MaxStateMigrationChunkSize},
		{field: control.ParamStateMigrationChunkSize, value: 64<<20 + 1, min: 1, max: control.MaxStateMigrationChunkSize},
		{field: control.ParamStateMigrationChunkSize, value: 1, ok: true},
		{field: control.ParamStateMigrationChunkSize, value: 1048576, ok: true},
		{field: control.ParamStateMigrationChunkSize, value: 64 << 20, ok: true},
		{field: control.ParamMigrationRate, value: 0, min: control.MinMigrationRate, max: control.MaxMigrationRate},
		{field: control.ParamMigrationRate, value: control.MinMigrationRate - 1, min: control.MinMigrationRate, max: control.MaxMigrationRate},
		{field: control.ParamMigrationRate, value: control.MaxMigrationRate + 1, min: control.MinMigrationRate, max: control.MaxMigrationRate},
		{field: control.ParamMigrationRate, value: control.MinMigrationRate, ok: true},
		{field: control.ParamMigrationRate, value: 64 << 20, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.field+"/"+strconv.FormatInt(tc.value, 10), func(t *testing.T) {
			doc := fmt.Sprintf(`{"QueryName":"q","%s":%d}`, tc.field, tc.value)
			in, err := ParseConfig("c.json", []byte(doc))
			if !tc.ok {
				want := fmt.Sprintf(`field %q: %d is out of range (must be between %d and %d)`, tc.field, tc.value, tc.min, tc.max)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one containing %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := in.Params[tc.field]; got != strconv.FormatInt(tc.value, 10) {
				t.Fatalf("Params[%s] = %q, want %d", tc.field, got, tc.value)
			}
		})
	}
}
