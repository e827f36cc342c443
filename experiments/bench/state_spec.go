package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"koala/experiments"
	"koala/queries"
)

// Scaling with state: for each total state size S the keyed counter is
// warmed with W = ⌈S / (8 + V)⌉ distinct keys (the sequential generator, each
// key once), each key holding a V-byte value (the 8-byte count and a pad,
// queries.ParamCounterPad), scaled out 2→4 with lazy fetch-on-demand, then
// fed from a fixed active set of A ≪ W keys. Bytes migrated should follow
// the active keys that moved, not the total state, so across S they should
// stay within TargetStateSpread of each other.
//
// The phase runs in-process (an embedded NATS, kfake and three workers inside
// koala bench: MeasureStateScaling), not on the stack: warming GBs of
// state through the stack's Kafka on this machine takes too long for a
// 20-minute bench. Large values make GB-scale state out of about a million
// keys, which builds in about 20 s per GB here (Pebble's write throughput);
// with 8-byte values a GB is ~60 M keys, too many for the bench's time.

// TargetStateSpread is the allowed spread of bytes migrated across state
// sizes: max ≤ (1 + spread) × min.
const TargetStateSpread = 0.20

// StatePoint is one state size.
type StatePoint struct {
	// TargetStateBytes is the size asked for; WarmKeys keys of
	// StateKeyBytes + ValueBytes each make it (StateSpec.WarmKeys).
	TargetStateBytes uint64 `json:"target_state_bytes"`
	WarmKeys         int    `json:"warm_keys"`
	ActiveKeys       int    `json:"active_keys"`
	ValueBytes       int    `json:"value_bytes"`
	// TotalStateBytes is key + value bytes of every warm key, computed from
	// the generator; MovedStateBytes of those whose bucket moved to the
	// added tasks; ActiveMovedBytes of the active keys the input touched
	// whose bucket moved (the oracle of what fetch-on-demand should
	// migrate). DiskBytes is what the workers' data directories (Pebble
	// sstables and logs) held after the warm-up.
	TotalStateBytes  uint64  `json:"total_state_bytes"`
	DiskBytes        uint64  `json:"disk_bytes"`
	MovedStateBytes  uint64  `json:"moved_state_bytes"`
	ActiveMovedBytes uint64  `json:"active_moved_bytes"`
	BytesMigrated    uint64  `json:"bytes_migrated"`
	KeysFetched      uint64  `json:"keys_fetched"`
	KLTEntries       int     `json:"klt_entries"`
	BuildSec         float64 `json:"build_sec"`    // warm-up: produce W keys until the sink saw them
	ReconfigSec      float64 `json:"reconfig_sec"` // the lazy reconfiguration workflow
	ActivePhaseSec   float64 `json:"active_sec"`   // active events until the sink saw them (the fetches happen here)
	Error            string  `json:"error,omitempty"`
}

// StateScaling is the phase's result.
type StateScaling struct {
	Points  []StatePoint `json:"points"`
	Command string       `json:"command,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// Spread is max/min − 1 of bytes migrated over the points without error;
// ok is false with fewer than two such points or a zero minimum.
func (s StateScaling) Spread() (spread float64, ok bool) {
	lo, hi, n := math.Inf(1), 0.0, 0
	for _, p := range s.Points {
		if p.Error != "" {
			continue
		}
		v := float64(p.BytesMigrated)
		lo, hi, n = math.Min(lo, v), math.Max(hi, v), n+1
	}
	if n < 2 || lo <= 0 {
		return 0, false
	}
	return hi/lo - 1, true
}

// Verdict: met when bytes migrated stay within TargetStateSpread across the
// sizes, missed otherwise, unknown without two good points.
func (s StateScaling) Verdict() string {
	sp, ok := s.Spread()
	if !ok {
		return VerdictUnknown
	}
	return verdict(sp <= TargetStateSpread)
}

func (s StateScaling) markdown() string {
	var b strings.Builder
	b.WriteString("\n\n## Scaling with state (lazy fetch-on-demand, 2 → 4 counter)\n\n")
	if len(s.Points) == 0 && s.Error == "" {
		b.WriteString("Not run.\n")
		return b.String()
	}
	b.WriteString("In-process cluster (embedded NATS, kfake Kafka, three workers, Pebble) inside `koala bench`, not the stack. Each size S (--state-sizes): warm W = ⌈S / (8 + V)⌉ keys once with the `sequential` generator, " +
		"the counter keeping V bytes per 8-byte key (--state-value-bytes: its 8-byte count and a pseudo-random pad, job parameter DummyFieldSize = V − 8; its output stays the count), " +
		"scale the counter out 2 → 4 (lazy, fetch-on-demand), then 5 × A events over a fixed active set of A keys. " +
		"*total state* is key + value bytes of the warm keys, from the generator; *on disk* what the workers' data directories (Pebble sstables and logs) held right after the warm-up. " +
		"*active moved* is the oracle: key + V bytes of the active keys the input touched whose bucket moved; every migrated entry is checked to be a key and a whole V-byte value. " +
		"Target: bytes migrated within 20 % across sizes. *build* is the warm-up (Pebble writes, flushes and compactions of S bytes); *reconfiguration* grows with W because the handoff lists every key of a moved bucket in the key lookup table.\n\n")
	commandAndError(&b, s.Command, s.Error)
	b.WriteString("| total state | warm keys × value | on disk | active keys | moved state | active moved | bytes migrated | KLT entries | build | reconfiguration | active phase | error |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range s.Points {
		fmt.Fprintf(&b, "| %s | %d × %d B | %s | %d | %s | %s | %s | %d | %.1f s | %.1f s | %.1f s | %s |\n",
			experiments.BytesText(float64(p.TotalStateBytes)), p.WarmKeys, p.ValueBytes, experiments.BytesText(float64(p.DiskBytes)), p.ActiveKeys,
			experiments.BytesText(float64(p.MovedStateBytes)), experiments.BytesText(float64(p.ActiveMovedBytes)), experiments.BytesText(float64(p.BytesMigrated)),
			p.KLTEntries, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec, esc(p.Error))
	}
	if sp, ok := s.Spread(); ok {
		fmt.Fprintf(&b, "\nBytes migrated spread across sizes: %.1f %% (max/min − 1) → %s.\n", 100*sp, s.Verdict())
	}
	return b.String()
}

// State phase bounds. A state value is the counter's 8-byte count followed by
// its pad (queries.ParamCounterPad), so it is at least 8 bytes.
const (
	StateKeyBytes      = 8 // produce.KeyName(i) for i < 10⁷
	MinStateValueBytes = 8
	MaxStateValueBytes = 8 + queries.MaxCounterPad
	// MaxStateBytes bounds one size (each is built on this machine's disk).
	MaxStateBytes = 64e9
)

// StateSpec is the phase's configuration.
type StateSpec struct {
	Sizes      []uint64 // total state per point, bytes (keys + values)
	ActiveKeys int
	ValueBytes int // per key: the 8-byte count and a pad of ValueBytes − 8
}

// WarmKeys is the smallest number of distinct keys whose key + value bytes
// reach size.
func (s StateSpec) WarmKeys(size uint64) int {
	entry := uint64(StateKeyBytes + s.ValueBytes)
	return int((size + entry - 1) / entry)
}

// Validate checks the bounds; errors name the field.
func (s StateSpec) Validate() error {
	if len(s.Sizes) == 0 {
		return fmt.Errorf("state sizes: none given")
	}
	if s.ValueBytes < MinStateValueBytes || s.ValueBytes > MaxStateValueBytes {
		return fmt.Errorf("state value bytes %d: want %d to %d (the 8-byte count and a pad of at most %d)", s.ValueBytes, MinStateValueBytes, MaxStateValueBytes, queries.MaxCounterPad)
	}
	if s.ActiveKeys <= 0 {
		return fmt.Errorf("active keys %d: must be a positive integer", s.ActiveKeys)
	}
	for _, size := range s.Sizes {
		if size > MaxStateBytes {
			return fmt.Errorf("state size %s: at most %s", experiments.BytesText(float64(size)), experiments.BytesText(MaxStateBytes))
		}
		if w := s.WarmKeys(size); w < s.ActiveKeys {
			return fmt.Errorf("state size %s holds %d keys of %d + %d bytes, fewer than the %d active keys", experiments.BytesText(float64(size)), w, StateKeyBytes, s.ValueBytes, s.ActiveKeys)
		}
	}
	return nil
}

// ParseByteSizes parses a comma-separated list of ParseByteSize values.
func ParseByteSizes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		b, err := ParseByteSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// ParseByteSize parses a positive size: a number of bytes, or a decimal
// number with a unit B, KB, MB or GB (powers of 1000, as the report prints
// them), e.g. "4096", "512MB", "0.5GB".
func ParseByteSize(s string) (uint64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	b := f * mult
	if err != nil || math.IsNaN(b) || b < 1 || b > 1e18 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with a unit B, KB, MB or GB (e.g. 512MB, 0.5GB)", s)
	}
	return uint64(math.Round(b)), nil
}
