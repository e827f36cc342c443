package main

import (
	"strings"
	"testing"
)

func TestStateSpecFlags(t *testing.T) {
	good := benchOpts{stateSizes: "0.5GB,1GB,2GB,4GB", stateValue: 4096, stateActive: 20000}
	s, err := stateSpec(good, "/tmp/out.json")
	if err != nil || len(s.Sizes) != 4 || s.Sizes[0] != 500e6 || s.Sizes[3] != 4e9 || s.ValueBytes != 4096 {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*benchOpts)
		wantErr string
	}{
		{"size unit", func(o *benchOpts) { o.stateSizes = "1TB" }, `--state-sizes "1TB"`},
		{"empty size", func(o *benchOpts) { o.stateSizes = "1GB,,2GB" }, "--state-sizes"},
		{"value too small", func(o *benchOpts) { o.stateValue = 4 }, "--state-value-bytes 4: want 8 to 1048584"},
		{"value too large", func(o *benchOpts) { o.stateValue = 2 << 20 }, "--state-value-bytes 2097152"},
		{"active", func(o *benchOpts) { o.stateActive = 0 }, "--state-active-keys 0"},
		{"active above warm", func(o *benchOpts) { o.stateSizes = "1MB" }, "fewer than the 20000 active keys"},
	} {
		o := good
		tc.change(&o)
		if _, err := stateSpec(o, "/tmp/out.json"); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}
