// Package statesvc owns keyed state: the storage backends (in-memory, local
// Pebble, later remote Pebble), the state key layout, and the key lookup table
// used by lazy migration.
package statesvc

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/grpc/credentials"
)

// KV is one write of a MultiPut. A nil Value deletes Key; an empty non-nil
// Value stores an empty value.
type KV struct{ Key, Value []byte }

// Store is a keyed state backend. Implementations are safe for concurrent use
// (the owning task and a concurrent fetch or transfer handler).
type Store interface {
	// MultiGet returns values aligned with keys (nil when absent). Values
	// stay valid after the call but may be shared with the store (a
	// Pebble store's value cache hands out its own): the caller must not
	// modify them.
	MultiGet(keys [][]byte) ([][]byte, error)
	// MultiPut applies all writes atomically (one batch), without fsync:
	// durability comes from checkpoints. A later KV for the same key wins.
	MultiPut(kvs []KV) error
	// Scan calls fn for every key in [start, end) in key order; a nil start
	// or end leaves that side unbounded. fn's slices are valid only during
	// the call; returning false stops the scan.
	Scan(start, end []byte, fn func(k, v []byte) bool) error
	// DeleteRange deletes every key in [start, end); nil bounds as for Scan.
	DeleteRange(start, end []byte) error
	// ApproxSize is the approximate bytes of live data (for metrics).
	ApproxSize() uint64
	// Close releases the store. Calls after Close return ErrClosed; Close
	// itself is idempotent.
	Close() error
}

// PutOwned writes kvs to s as MultiPut does, where owned[i] says the
// caller gives kvs[i].Value up (Pebble.PutOwned); other stores copy as
// usual.
func PutOwned(s Store, kvs []KV, owned []bool) error {
	if o, ok := s.(interface {
		PutOwned(kvs []KV, owned []bool) error
	}); ok {
		return o.PutOwned(kvs, owned)
	}
	return s.MultiPut(kvs)
}

// ErrClosed is returned by Store methods called after Close.
var ErrClosed = errors.New("statesvc: store closed")

// Backend names, as in the Koala artifact's "StateBackendType".
const (
	BackendMemory = "memory"
	BackendPebble = "pebble"
	// BackendRemotePebble is the remote state service (see Remote, Server).
	BackendRemotePebble = "remote-pebble"
)

// Defaults for Options. On state far beyond the caches every flush's L0
// files are compacted into a base level they overlap entirely, so L0 is
// compacted from 8 files, not 4 (pebble.go; BenchmarkPebbleLargeStateGetPut:
// 64 -> 52 µs of CPU per key read and rewritten).
//
// The memtable is 64 MiB (the artifact's RocksDB write buffer). Every flush
// writes a blob file that each base-level table it overlaps then
// references, so the flush rate sets how soon tables pass
// blobReferenceDepth and have their values rewritten; a 4x larger memtable
// makes those rewrites 4x rarer. Measured (2026-12-04, koala bench rows, one
// run each, machine idle): q6-1task 18.3 K -> 24.0 K closed auctions per
// worker CPU-s over its 40 s window (compactions 23 % -> 11 % of the
// stateful worker's CPU; the warm-up's checkpoint 3.4 -> 2.2 GB), 22.5 K
// over 240 s; q6-2tasks 15.3 K -> 25.1 K; counter-10m 146 K, 149 K and 141 K
// (128-148 K at 16 MiB). An earlier measurement (2026-12-02) had 64 MiB
// slow the counter over 10 M keys (74 K -> 45 K), from reads of small values
// in memtables and L0; the store's written-key filter now answers most of
// those reads before Pebble does. Pebble grows a store's memtables from
// 256 KiB as they fill, so a small store does not pay for the size.
//
// The block cache is 256 MiB (the artifact's is 512 MiB): Pebble allocates
// it as blocks arrive, so small state costs nothing more, and on state far
// larger than it, a read finds the index blocks it needs cached and pays
// one data block read instead of two or three. The value cache in front
// of Pebble takes up to 512 MiB more (valueCacheMultiple): values, not
// blocks, are what a stateful operator reads back (pebble.go).
const (
	DefaultCacheBytes    int64 = 256 << 20
	DefaultMemTableBytes int64 = 64 << 20
	// DefaultValueSeparationBytes: values of a kilobyte and more (q6*'s
	// 2 KB seller state, a window's buffered records) are separated; the
	// counters' 8-byte values and small aggregates stay inline. Measured
	// (2026-12-03): BenchmarkPebbleLargeStateGetPut 38-47 µs of CPU per 2 KB
	// key read and rewritten against 60-63 µs inline; the bench's q6-1task
	// row 14.4-16.4 K closed auctions per worker CPU-s (21.3-23.0 K/s)
	// against 12.8 K (16.8 K/s) inline, the same hour.
	DefaultValueSeparationBytes = 1024
)

// Options selects and configures a backend.
type Options struct {
	// Backend is "memory", "pebble" or "remote-pebble".
	Backend string
	// Dir is the Pebble directory; required for "pebble", unused otherwise.
	Dir string
	// Addrs are the state servers (host:port) of "remote-pebble", sharded
	// by bucket; required for it, unused otherwise. Order matters.
	Addrs []string
	// Namespace is the job id under which "remote-pebble" keeps the job's
	// keys, apart from every other job using the same servers; required for
	// it, unused otherwise. All tasks of one job must use the same one.
	Namespace string
	// CacheBytes is the Pebble block cache size; 0 means DefaultCacheBytes.
	// The cache is allocated with room for the memtables that may queue
	// (four) on top, because Pebble reserves memtable memory inside its
	// block cache. The value cache in front of Pebble takes up to
	// 2 × CacheBytes more (at most 512 MiB), so a store of large state holds
	// about 3 × CacheBytes and two to four memtables.
	CacheBytes int64
	// MemTableBytes is the Pebble memtable size; 0 means DefaultMemTableBytes.
	MemTableBytes int64
	// ValueSeparationBytes is the smallest value Pebble keeps in blob files
	// apart from its sstables, so compactions move a reference instead of
	// rewriting the value; 0 means DefaultValueSeparationBytes, -1 keeps
	// every value in the sstables.
	ValueSeparationBytes int
	// Volatile trades crash durability for CPU ("pebble" only): no WAL, and
	// recent writes wait in the value cache and reach Pebble in batches
	// where each key is written once however often it changed. A process
	// that dies loses those writes and the memtable, so it is only for a
	// store whose directory is never reopened after a crash and whose
	// durability comes from Checkpoint (which, like Close, flushes
	// everything first): a stream task's state, recovered from aligned
	// checkpoints into a fresh directory. Not for the state server.
	Volatile bool
	// RemoteCreds are the transport credentials of "remote-pebble"
	// connections; nil means plaintext.
	RemoteCreds credentials.TransportCredentials
	// Logger receives Pebble's messages (informational ones at debug level,
	// background errors at warn); nil means slog.Default().
	Logger *slog.Logger

	// tune, when set (benchmarks of this package), adjusts Pebble's
	// options after OpenPebble chose them, to measure alternatives.
	tune func(*pebble.Options)
}

// valueSeparationMin is the smallest separated value, 0 for none.
func (o *Options) valueSeparationMin() int {
	switch o.ValueSeparationBytes {
	case 0:
		return DefaultValueSeparationBytes
	case -1:
		return 0
	}
	return o.ValueSeparationBytes
}

// Validate checks the options, naming the offending field and its allowed values.
func (o *Options) Validate() error {
	switch o.Backend {
	case BackendMemory:
	case BackendPebble:
		if strings.TrimSpace(o.Dir) == "" {
			return fmt.Errorf("statesvc: Options.Dir is required for Backend %q", BackendPebble)
		}
	case BackendRemotePebble:
		if len(o.Addrs) == 0 {
			return fmt.Errorf("statesvc: Options.Addrs (state server host:port list) is required for Backend %q", BackendRemotePebble)
		}
		if err := CheckNamespace(o.Namespace); err != nil {
			return fmt.Errorf("statesvc: Options.Namespace for Backend %q: %w", BackendRemotePebble, err)
		}
	default:
		return fmt.Errorf("statesvc: Options.Backend %q unknown; allowed: %q, %q, %q",
			o.Backend, BackendMemory, BackendPebble, BackendRemotePebble)
	}
	if o.CacheBytes < 0 {
		return fmt.Errorf("statesvc: Options.CacheBytes %d must be >= 0 (0 = default %d)", o.CacheBytes, DefaultCacheBytes)
	}
	if o.ValueSeparationBytes < -1 {
		return fmt.Errorf("statesvc: Options.ValueSeparationBytes %d must be >= -1 (0 = default %d, -1 = off)", o.ValueSeparationBytes, DefaultValueSeparationBytes)
	}
	if o.MemTableBytes < 0 || o.MemTableBytes >= 4<<30 {
		return fmt.Errorf("statesvc: Options.MemTableBytes %d must be in [0, 4 GiB) (0 = default %d)", o.MemTableBytes, DefaultMemTableBytes)
	}
	return nil
}

// Open validates o and opens the selected backend.
func Open(o Options) (Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	switch o.Backend {
	case BackendMemory:
		return NewMemory(), nil
	case BackendRemotePebble:
		return OpenRemote(o.Addrs, RemoteOptions{Namespace: o.Namespace, Creds: o.RemoteCreds})
	default:
		return OpenPebble(o)
	}
}

// copyValues copies vals into one allocation (one per batch instead of one
// per value); each result is capped so appends by the caller cannot spill
// into a neighbour. nil stays nil.
func copyValues(vals [][]byte) [][]byte {
	total := 0
	for _, v := range vals {
		total += len(v)
	}
	buf := make([]byte, 0, total)
	for i, v := range vals {
		if v == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, v...)
		vals[i] = buf[start:len(buf):len(buf)]
	}
	return vals
}

// Export calls fn once for every key in [start, end) of s, in no
// particular order, where the store can do that without first writing a
// write-back cache's buffered writes to disk (Pebble.Export); other stores
// scan. fn's slices are valid only during the call; fn must not write s.
func Export(s Store, start, end []byte, fn func(k, v []byte) bool) error {
	if e, ok := s.(interface {
		Export(start, end []byte, fn func(k, v []byte) bool) error
	}); ok {
		return e.Export(start, end, fn)
	}
	return s.Scan(start, end, fn)
}

// MoveOut hands every key of [start, end) of s to fn, in no particular
// order, and then deletes the range, for a caller that guarantees nothing
// else reads or writes the range meanwhile; a store that cannot do it
// faster (Pebble.MoveOut) scans and range-deletes. If fn stops the move
// nothing is deleted.
func MoveOut(s Store, start, end []byte, fn func(k, v []byte) bool) error {
	if m, ok := s.(interface {
		MoveOut(start, end []byte, fn func(k, v []byte) bool) error
	}); ok {
		return m.MoveOut(start, end, fn)
	}
	done := true
	if err := s.Scan(start, end, func(k, v []byte) bool {
		done = fn(k, v)
		return done
	}); err != nil {
		return err
	}
	if !done {
		return nil
	}
	return s.DeleteRange(start, end)
}

// MoveOutPacked is MoveOut handing the keys to send packed (packed.go) in
// chunks of at most limit bytes (a chunk holds one pair at least); a store
// that cannot pack them in place (Pebble.MoveOutPacked) packs what MoveOut
// hands out. If send fails, nothing is deleted and its error is returned.
func MoveOutPacked(s Store, start, end []byte, limit int, send func(chunk []byte) error) error {
	if m, ok := s.(interface {
		MoveOutPacked(start, end []byte, limit int, send func(chunk []byte) error) error
	}); ok {
		return m.MoveOutPacked(start, end, limit, send)
	}
	// Scan, send, and delete only once everything went out.
	pk := &packer{limit: limit, send: send}
	var sendErr error
	if err := s.Scan(start, end, func(k, v []byte) bool {
		sendErr = pk.add(k, v)
		return sendErr == nil
	}); err != nil {
		return err
	}
	if sendErr == nil {
		sendErr = pk.flush()
	}
	if sendErr != nil {
		return sendErr
	}
	return s.DeleteRange(start, end)
}
