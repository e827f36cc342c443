package statesvc

import (
	"runtime"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// sharedFileCache is the one Pebble file cache (open sstables and blob
// files) of every store in this process, sized by openFileBudget. Open
// files are a process's resource: one cache bounds them however many
// stores a worker holds, where a cache per store would multiply them.
// Gigabytes of separated values live in a few thousand blob files (q6* over
// 2.2 GB: up to 2.1 K), and uniform reads over more files than the cache
// holds reopen a file, and read its index, on some reads: with Pebble's
// 1000 and an unbounded reference depth, 13 % of the stateful worker's CPU
// on q6*, and 4.3 % of file lookups missing over 1.4 K blob files in
// BenchmarkPebbleLargeStateChurn. It holds its own reference for the
// process's life; each store's DB takes one more.
var sharedFileCache = sync.OnceValue(func() *pebble.FileCache {
	return pebble.NewFileCache(4*runtime.GOMAXPROCS(0), openFileBudget())
})
