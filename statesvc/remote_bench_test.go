package statesvc

import "testing"

// BenchmarkRemoteMultiGetPut is benchGetPut (one multi-get and one
// multi-put of 1000 keys, 100-byte values) against one state server on
// loopback.
func BenchmarkRemoteMultiGetPut(b *testing.B) {
	r := mustOpenRemote(b, startServers(b, 1), RemoteOptions{})
	benchGetPut(b, r)
}

// BenchmarkRemoteMultiGetPut3 is the same with the keys sharded over three
// servers on loopback.
func BenchmarkRemoteMultiGetPut3(b *testing.B) {
	r := mustOpenRemote(b, startServers(b, 3), RemoteOptions{})
	benchGetPut(b, r)
}
