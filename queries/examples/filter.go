package examples

import (
	"encoding/binary"

	"koala/dataplane"
)

// EvenSequence keeps records whose value starts with an even little-endian
// uint64 (the "keys" generator writes the record number there).
func EvenSequence(r dataplane.Record) bool {
	return len(r.Value) >= 8 && binary.LittleEndian.Uint64(r.Value)%2 == 0
}

// Filter: every other generated record.
var Filter = dataplane.NewQuery("example-filter").
	Describe("source -> filter (even record numbers) -> sink").
	Source("source", 1).
	Filter("filter", EvenSequence).
	Sink("sink")

func init() {
	register(Filter, "the filter drops records on purpose; its oracle test checks it")
}
