//go:build !unix

package statesvc

// openFileBudget is Pebble's default where the open-file limit is not read.
func openFileBudget() int { return 1000 }
