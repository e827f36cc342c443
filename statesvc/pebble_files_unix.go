//go:build unix

package statesvc

import "syscall"

// openFileBudget is how many files the Pebble stores of this process may
// keep open together: half the open-file limit, between Pebble's default
// 1000 and 10000 (the rest is for sockets, logs and files being written).
func openFileBudget() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1000
	}
	return int(min(max(lim.Cur/2, 1000), 10000))
}
