package control

import (
	"strings"
	"testing"
)

// TestMigrationRate: unset is the default, a value inside the range is
// taken, and values outside it or not numbers are refused with an error
// naming the parameter and the range.
func TestMigrationRate(t *testing.T) {
	job := func(v string) JobSpec {
		if v == "" {
			return JobSpec{}
		}
		return JobSpec{Params: map[string]string{ParamMigrationRate: v}}
	}
	if n, err := MigrationRate(job("")); err != nil || n != DefaultMigrationRate {
		t.Fatalf("unset: %d, %v; want %d", n, err, DefaultMigrationRate)
	}
	if n, err := MigrationRate(job("1048576")); err != nil || n != 1<<20 {
		t.Fatalf("1 MiB/s: %d, %v", n, err)
	}
	for _, bad := range []string{"65535", "4294967297", "fast", "-1"} {
		_, err := MigrationRate(job(bad))
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), ParamMigrationRate) || !strings.Contains(err.Error(), "65536") {
			t.Errorf("%q: error %q does not name the parameter and its range", bad, err)
		}
	}
}
