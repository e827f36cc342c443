// Package inproc runs a data plane inside the calling process: an embedded
// NATS server, franz-go's kfake Kafka broker and a few workers with their
// own Pebble directories, all on free loopback ports. The state phase of
// `koala bench` measures on it because warming gigabytes of state through
// the local stack's Kafka takes too long on a small machine; it is regular
// code (not a test helper) so that the bench binary can call it directly.
package inproc
