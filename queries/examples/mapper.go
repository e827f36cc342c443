package examples

import (
	"bytes"

	"koala/dataplane"
)

// UpperKey upper-cases a record's key and keeps the rest.
func UpperKey(r dataplane.Record) dataplane.Record {
	r.Key = bytes.ToUpper(r.Key)
	return r
}

// Mapper: a stateless map.
var Mapper = dataplane.NewQuery("example-mapper").
	Describe("source -> map (upper-case keys) -> sink").
	Source("source", 1).
	Map("mapper", UpperKey).Parallelism(2).
	Sink("sink")

func init() { register(Mapper, "") }
