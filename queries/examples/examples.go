// Package examples holds the shortest complete queries, one per file:
// a keyed counter, a filter, a mapper and a tumbling-window count. Each is
// a few lines of the dataplane query builder and is registered with
// package queries under the name "example-<kind>".
//
// Import the package for its side effect to make the queries available:
//
//	import _ "koala/queries/examples"
package examples

import (
	"koala/dataplane"
	"koala/queries"
)

// register builds q and adds it to the query registry.
// unchecked is why the sink ledger cannot check q (see queries.Query).
func register(q *dataplane.QueryBuilder, unchecked string) {
	if err := queries.Register(queries.Query{Name: q.Name(), Description: q.Description(), Operators: q.MustBuild(), Unchecked: unchecked}); err != nil {
		panic(err)
	}
}
