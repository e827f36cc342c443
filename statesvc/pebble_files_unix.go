//go:build unix

package statesvc

import "syscall"

// maxOpenFiles is the Pebble file cache's size: a quarter of this process's
// open-file limit, between Pebble's default 1000 and 5000. Gigabytes of
// separated values live in a few thousand blob files (q6* over 2.2 GB: up
// to 2.1 K), and uniform reads over more files than the cache holds reopen
// a file, and read its index, on some reads: with 1000 and an unbounded
// reference depth, 13 % of the stateful worker's CPU on q6*, and 4.3 % of
// file lookups missing over 1.4 K blob files in
// BenchmarkPebbleLargeStateChurn. A worker holds several stores, hence the
// quarter.
func maxOpenFiles() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1000
	}
	return int(min(max(lim.Cur/4, 1000), 5000))
}
