package statesvc

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Namespaces of the remote backend.
//
// A state service is shared by every job that names it, and state keys only
// carry the operator (see StateKey). So that two jobs with an operator of
// the same name never see each other's state, every key a Remote sends is
// prefixed with its namespace (the job id):
//
//	uvarint(len(namespace)) | namespace | state key
//
// A uvarint is self-delimiting, so no namespace's prefix is a prefix of
// another's: the keys of one namespace are exactly the range
// [prefix, PrefixEnd(prefix)). The prefix is added and stripped by the
// client alone; the server and the wire format are unchanged. Servers are
// still picked from the unprefixed key, so a bucket lives on the same server
// whatever the namespace.

// MaxNamespaceLen bounds a remote namespace (a job id) in bytes; Temporal
// workflow ids, from which job ids are derived, are shorter.
const MaxNamespaceLen = 1024

// CheckNamespace reports whether ns can name the keys of one job in the
// remote state service.
func CheckNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("statesvc: remote-pebble namespace (the job id) is empty; every job needs its own so jobs sharing a state service never see each other's state")
	case len(ns) > MaxNamespaceLen:
		return fmt.Errorf("statesvc: remote-pebble namespace %.32q... is %d bytes, at most %d allowed", ns, len(ns), MaxNamespaceLen)
	}
	return nil
}

// namespacePrefix is the prefix of every key of namespace ns.
func namespacePrefix(ns string) []byte {
	p := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(ns)), uint64(len(ns)))
	return append(p, ns...)
}

// prefixKeys returns keys with the namespace prefix, built in one buffer.
func (r *Remote) prefixKeys(keys [][]byte) [][]byte {
	total := 0
	for _, k := range keys {
		total += len(r.prefix) + len(k)
	}
	buf := make([]byte, 0, total)
	out := make([][]byte, len(keys))
	for i, k := range keys {
		s := len(buf)
		buf = append(buf, r.prefix...)
		buf = append(buf, k...)
		out[i] = buf[s:len(buf):len(buf)]
	}
	return out
}

// prefixKVs is prefixKeys for writes; values are passed through.
func (r *Remote) prefixKVs(kvs []KV) []KV {
	keys := make([][]byte, len(kvs))
	for i, kv := range kvs {
		keys[i] = kv.Key
	}
	keys = r.prefixKeys(keys)
	out := make([]KV, len(kvs))
	for i, kv := range kvs {
		out[i] = KV{Key: keys[i], Value: kv.Value}
	}
	return out
}

// prefixRange maps a range of the namespace's key space (nil bounds:
// unbounded) to the server's key space, where it stays inside the namespace.
func (r *Remote) prefixRange(start, end []byte) (pstart, pend []byte) {
	pstart = append(bytes.Clone(r.prefix), start...)
	if end == nil {
		return pstart, PrefixEnd(r.prefix) // never nil: the uvarint's last byte is below 0x80
	}
	return pstart, append(bytes.Clone(r.prefix), end...)
}

// stripKey returns k without the namespace prefix; a key outside the
// namespace means the server answered beyond the range asked for.
func (r *Remote) stripKey(sh *remoteShard, k []byte) ([]byte, error) {
	if !bytes.HasPrefix(k, r.prefix) {
		return nil, fmt.Errorf("statesvc: remote-pebble server %s: scan returned key %q outside namespace %q", sh.addr, k, r.namespace)
	}
	return k[len(r.prefix):], nil
}

// Namespace is the namespace (job id) this Remote reads and writes.
func (r *Remote) Namespace() string { return r.namespace }

// DropNamespace deletes every key of this Remote's namespace on every
// server, and nothing else: other namespaces' keys lie outside the range.
// Meant for when the job that owns the namespace ended.
func (r *Remote) DropNamespace() error {
	return r.DeleteRange(nil, nil)
}
