package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStateSpecValidate(t *testing.T) {
	good := StateSpec{Sizes: []uint64{500e6, 1e9}, ActiveKeys: 20000, ValueBytes: 4096}
	if err := good.Validate(); err != nil {
		t.Errorf("%+v: %v", good, err)
	}
	if w := good.WarmKeys(1e9); w != 243665 { // ⌈10⁹ / 4104⌉
		t.Errorf("warm keys of 1 GB at 4096-byte values: %d", w)
	}
	for _, tc := range []struct {
		spec    StateSpec
		wantErr string
	}{
		{StateSpec{ActiveKeys: 10, ValueBytes: 8}, "state sizes: none given"},
		{StateSpec{Sizes: []uint64{1e6}, ActiveKeys: 0, ValueBytes: 8}, "active keys 0"},
		{StateSpec{Sizes: []uint64{1e6}, ActiveKeys: 10, ValueBytes: 7}, "state value bytes 7: want 8 to 1048584"},
		{StateSpec{Sizes: []uint64{1e6}, ActiveKeys: 10, ValueBytes: 1048585}, "state value bytes 1048585"},
		{StateSpec{Sizes: []uint64{1e6}, ActiveKeys: 10, ValueBytes: -3}, "state value bytes -3"},
		{StateSpec{Sizes: []uint64{1000}, ActiveKeys: 100, ValueBytes: 8}, "fewer than the 100 active keys"},
		{StateSpec{Sizes: []uint64{100e9}, ActiveKeys: 10, ValueBytes: 8}, "at most 64.00 GB"},
	} {
		if err := tc.spec.Validate(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Validate(%+v): %v, want an error containing %q", tc.spec, err, tc.wantErr)
		}
	}
	if _, err := ParseByteSizes("1000000,-5"); err == nil || !strings.Contains(err.Error(), `size "-5"`) {
		t.Errorf("ParseByteSizes with a negative size: %v", err)
	}
}

func TestStateSpecFlags(t *testing.T) {
	good := Options{StateSizes: "0.5GB,1GB,2GB,4GB", StateValueBytes: 4096, StateActiveKeys: 20000}
	s, err := stateSpec(good)
	if err != nil || len(s.Sizes) != 4 || s.Sizes[0] != 500e6 || s.Sizes[3] != 4e9 || s.ValueBytes != 4096 {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"size unit", func(o *Options) { o.StateSizes = "1TB" }, `--state-sizes "1TB"`},
		{"empty size", func(o *Options) { o.StateSizes = "1GB,,2GB" }, "--state-sizes"},
		{"value too small", func(o *Options) { o.StateValueBytes = 4 }, "--state-value-bytes 4: want 8 to 1048584"},
		{"value too large", func(o *Options) { o.StateValueBytes = 2 << 20 }, "--state-value-bytes 2097152"},
		{"active", func(o *Options) { o.StateActiveKeys = 0 }, "--state-active-keys 0"},
		{"active above warm", func(o *Options) { o.StateSizes = "1MB" }, "fewer than the 20000 active keys"},
	} {
		o := good
		tc.change(&o)
		if _, err := stateSpec(o); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{{"4096", 4096}, {"512MB", 512e6}, {"0.5GB", 500e6}, {" 4 gb ", 4e9}, {"2KB", 2000}, {"10B", 10}} {
		if got, err := ParseByteSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "GB", "-1GB", "0", "0.1", "1TB", "abc", "NaN"} {
		if _, err := ParseByteSize(bad); err == nil || !strings.Contains(err.Error(), "unit B, KB, MB or GB") {
			t.Errorf("ParseByteSize(%q): %v, want an error naming the units", bad, err)
		}
	}
}

func TestStateScalingVerdict(t *testing.T) {
	pts := func(bs ...uint64) StateScaling {
		var s StateScaling
		for _, b := range bs {
			s.Points = append(s.Points, StatePoint{BytesMigrated: b})
		}
		return s
	}
	if v := pts(1000, 1100, 1190).Verdict(); v != VerdictMet {
		t.Errorf("within 19 %%: %s", v)
	}
	if v := pts(1000, 2000).Verdict(); v != VerdictMissed {
		t.Errorf("doubled: %s", v)
	}
	if v := pts(1000).Verdict(); v != VerdictUnknown {
		t.Errorf("one point: %s", v)
	}
	s := pts(1000, 5000)
	s.Points[1].Error = "failed"
	if v := s.Verdict(); v != VerdictUnknown {
		t.Errorf("failed point counted: %s", v)
	}
}

// The state phase as koala bench runs it (benchState, which Run calls), on
// one small size: MeasureStateScaling checks that every migrated entry is a
// key and a whole value, and the phase keeps its JSON and log.
func TestBenchStateScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process cluster")
	}
	o := Options{ResultsDir: t.TempDir(), StateSizes: "60KB", StateValueBytes: 64, StateActiveKeys: 200}
	spec, err := stateSpec(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := benchState(ctx, o)
	if res.Error != "" || len(res.Points) != 1 {
		t.Fatalf("error %q, %d points; want one point: %+v", res.Error, len(res.Points), res)
	}
	p := res.Points[0]
	if p.Error != "" {
		t.Fatalf("point: %s", p.Error)
	}
	if p.WarmKeys != spec.WarmKeys(60_000) || p.TotalStateBytes != uint64(p.WarmKeys)*(StateKeyBytes+64) {
		t.Errorf("warm keys %d, total state %d B; want %d keys of %d B", p.WarmKeys, p.TotalStateBytes, spec.WarmKeys(60_000), StateKeyBytes+64)
	}
	if p.BytesMigrated == 0 || p.BytesMigrated != p.KeysFetched*(StateKeyBytes+64) {
		t.Errorf("migrated %d B in %d keys; want a whole key and value per key", p.BytesMigrated, p.KeysFetched)
	}
	if p.KLTEntries == 0 || p.DiskBytes == 0 {
		t.Errorf("KLT entries %d, on disk %d B; want both above zero", p.KLTEntries, p.DiskBytes)
	}
	data, err := os.ReadFile(filepath.Join(o.ResultsDir, "state-scaling.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved StateScaling
	if err := json.Unmarshal(data, &saved); err != nil || len(saved.Points) != 1 || saved.Points[0].BytesMigrated != p.BytesMigrated {
		t.Errorf("state-scaling.json: %v, %+v", err, saved)
	}
	if !strings.Contains(res.Command, "--state-sizes 60KB") {
		t.Errorf("command %q does not name the sizes", res.Command)
	}
	if _, err := os.Stat(filepath.Join(o.ResultsDir, "state-scaling.log")); err != nil {
		t.Error(err)
	}
}
