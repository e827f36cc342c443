package queries

import (
	"bytes"
	"testing"

	"koala/dataplane"
)

// helloMap upper-cases every key like bytes.ToUpper and keeps the rest of
// each record, also when keys of a batch share one buffer.
func TestHelloMapUpperCasesKeys(t *testing.T) {
	keys := []string{"k0000001", "", "Mixed-Case_9", "grüße", "already UPPER", "ß", "zz"}
	var in []dataplane.Record
	for i, k := range keys {
		in = append(in, dataplane.Record{Key: []byte(k), Value: []byte{byte(i)}, EventTime: int64(i), Partition: int32(i), Offset: int64(100 + i)})
	}
	var out []dataplane.Record
	if err := helloMap(in, func(r dataplane.Record) { out = append(out, r) }); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("emitted %d records, want %d", len(out), len(in))
	}
	for i, r := range out {
		if want := bytes.ToUpper([]byte(keys[i])); !bytes.Equal(r.Key, want) {
			t.Errorf("record %d: key %q, want %q", i, r.Key, want)
		}
		if string(in[i].Key) != keys[i] {
			t.Errorf("record %d: input key changed to %q", i, in[i].Key)
		}
		if r.Value[0] != byte(i) || r.EventTime != int64(i) || r.Partition != int32(i) || r.Offset != int64(100+i) {
			t.Errorf("record %d: identity changed: %+v", i, r)
		}
	}
	// Keys sharing the buffer must not overlap: appending to one cannot
	// change the next.
	_ = append(out[0].Key, 'X')
	if string(out[2].Key) != "MIXED-CASE_9" {
		t.Errorf("appending to a key changed another: %q", out[2].Key)
	}
}
