//go:build !unix

package statesvc

// maxOpenFiles is Pebble's default where the open-file limit is not read.
func maxOpenFiles() int { return 1000 }
