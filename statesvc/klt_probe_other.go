//go:build !amd64 || purego

package statesvc

// lookupBatchFast has no assembly on this platform: lookupGroup does the
// work.
func (k *KLT) lookupBatchFast(keys [][]byte, out []uint32, slow []int) ([]int, bool) {
	return slow, false
}
