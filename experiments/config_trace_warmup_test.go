package experiments

import (
	"strings"
	"testing"
)

// A synthetic trace's warm-up draws one new key per record (NumEvents ×
// producers keys); its measurement run and a replayed trace file keep the
// Zipf stream.
func TestTraceWarmUpIsSequential(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		seq          bool
		keys         int
		note         string
	}{
		{name: "warm-up", config: `{"QueryName": "borg", "IsWarmUp": true, "NumEvents": 3000, "NumProducers": 2, "NumKeys": 100000, "WarmUpDataFolder": {"Pebble": "snapshots/x"}}`,
			seq: true, keys: 100000},
		{name: "warm-up, key count from NumEvents", config: `{"QueryName": "azure", "IsWarmUp": true, "NumEvents": 3000, "NumProducers": 2, "WarmUpDataFolder": {"Pebble": "snapshots/x"}}`,
			seq: true, keys: 6000, note: "one new key per record"},
		{name: "warm-up going round its keys", config: `{"QueryName": "twitch", "IsWarmUp": true, "NumEvents": 3000, "NumKeys": 500, "WarmUpDataFolder": {"Pebble": "snapshots/x"}}`,
			seq: true, keys: 500, note: "go round its 500 keys"},
		{name: "artifact warm-up name", config: `{"QueryName": "borg_warmup", "NumEvents": 10, "WarmUpDataFolder": {"Pebble": "snapshots/x"}}`,
			seq: true, keys: 10},
		{name: "measurement", config: `{"QueryName": "borg", "LoadWarmUpData": true, "NumEvents": 3000, "NumKeys": 500, "WarmUpDataFolder": {"Pebble": "snapshots/x"}}`,
			keys: 500},
		{name: "counter warm-up", config: `{"QueryName": "counter", "IsWarmUp": true, "NumEvents": 3000, "NumKeys": 500, "WarmUpDataFolder": {"Pebble": "snapshots/x"}}`,
			keys: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, notes, err := ParseConfigNotes(tc.name+".json", []byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			if in.Producer.Sequential != tc.seq || in.Producer.NumKeys != tc.keys {
				t.Errorf("Sequential %v NumKeys %d, want %v and %d", in.Producer.Sequential, in.Producer.NumKeys, tc.seq, tc.keys)
			}
			if tc.note != "" && !strings.Contains(strings.Join(notes, "\n"), tc.note) {
				t.Errorf("notes %q, want one saying %q", notes, tc.note)
			}
		})
	}
}
