package dataplane

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/exchange"
	"koala/statesvc"
)

// Background migration.
//
// Eventual (progressive) migration moves the keys a task's lookup table
// still lists from their old owners. On the task goroutine, after every
// batch, it made each batch wait for a pull, and a lazy rescale's
// throughput dropped to under half. A migrator goroutine per task does it
// beside the batches instead, one chunk at a time, under a byte-rate budget
// (control.ParamMigrationRate), hottest buckets first.
//
// A background chunk of one (bucket, owner) has three steps, none of which
// the task goroutine waits for:
//
//  1. peek: the owner returns the bucket's next keys, from where the
//     previous chunk stopped, with their values, and keeps them;
//  2. commit: in steps of commitStep keys, each peeked key that no batch
//     has claimed is marked committing (under mu), written to the store
//     (not under mu), then its lookup entry is removed and it is noted as
//     committed (under mu);
//  3. drop: the owner deletes the committed keys, recording their values in
//     its served log like any fetch, and they leave the committed set.
//
// A batch looks its keys up under mu (lookupBatch): a committed key is
// local (its value is here; the owner's copy is about to go), and a key the
// table lists as remote is claimed and taken from its owner as before. A
// commit skips claimed keys, so a key a batch needs while it is being
// pulled is moved once, by the batch, and the migrator's copy, older than
// what the batch wrote, is never stored. A claim outlives its batch until
// the peek in flight when the batch released it is committed: that peek
// may carry the key's value from before the batch took it. A batch that
// needs a key of the commit step being written — at most commitStep keys,
// one store write — waits for that write; other batches never wait for
// the migrator's writes.
//
// Checkpoints: a part captures the store and the table under mu
// (holdCommits), and a step removes its keys' lookup entries under mu once
// their values are in the store, so a part either lists a key as remote
// (its value may already be here too: restore then keeps this task's,
// which is the owner's copy) or holds its value. A key's drop carries this
// task's last checkpoint, read after the key left the table, so if a part
// still lists it the drop names that part, and the owner's part of that
// checkpoint holds the value (in its store, or in its served log:
// checkpoint_klt.go). A committed key leaves the table before its drop,
// so no part lists a key whose value here is newer than the owner's.
//
// What runs on the task goroutine and moves keys itself — a handoff of
// buckets away, stop-and-restart's bulk copy, the window index's full
// migration — takes chunkMu: it waits for the one background chunk that
// may be in flight, never for a pull of its own batch's keys.
type migrator struct {
	t  *task
	ks *keyedState
	// rate is the budget in state bytes per second; chunkBytes bounds one
	// background pull.
	rate       int
	chunkBytes int

	// chunkMu is held for a whole chunk, background or on the task
	// goroutine; resume (guarded by it) is where each (bucket, owner)'s
	// next pull starts (exchange.FetchRequest.From).
	chunkMu sync.Mutex
	resume  map[segmentID][]byte

	mu sync.Mutex
	// claims: user keys a batch is fetching itself; 0 while its batch
	// runs, else the peek generation that must be committed before the
	// claim may go.
	claims    map[string]uint64
	committed map[string]struct{}
	// committing: the keys of the commit step being written; stepDone is
	// closed when it is.
	committing map[string]struct{}
	stepDone   chan struct{}
	peekGen    uint64
	peeking    bool // a peek of generation peekGen is not fully committed
	inChunk    bool // a background chunk has not finished its drop
	running    bool // the migrator goroutine runs
	closed     bool
	stop       chan struct{}
	exited     chan struct{} // closed when the running goroutine ends

	// want: the task goroutine's latest word on whether the table's keys
	// should move in the background (keyedState.wantsMigration).
	want atomic.Bool
}

type segmentID struct {
	bucket int
	owner  string
}

// backgroundChunkBytes bounds a background pull: a chunk's commit writes
// at most this much in steps of commitStep keys, and its time shows up
// as one entry of the batch-time histogram, so it is kept near a batch's.
const backgroundChunkBytes = 256 << 10

// commitStep is how many keys a commit writes at a time: a batch that
// needs one of them waits for that one store write.
const commitStep = 256

func newMigrator(job control.JobSpec, ks *keyedState) (*migrator, error) {
	rate, err := control.MigrationRate(job)
	if err != nil {
		return nil, err
	}
	// A chunk of an eighth of a second's budget keeps the pacing smooth at
	// low rates.
	chunk := min(max(rate/8, 16<<10), backgroundChunkBytes, ks.chunkBytes)
	return &migrator{ks: ks, rate: rate, chunkBytes: chunk, resume: map[segmentID][]byte{},
		claims: map[string]uint64{}, committed: map[string]struct{}{}, committing: map[string]struct{}{}, stop: make(chan struct{})}, nil
}

// kick starts the migrator goroutine of task t unless it runs (task
// goroutine).
func (m *migrator) kick(ctx context.Context, t *task) {
	m.want.Store(true)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running || m.closed {
		return
	}
	m.t = t
	m.running = true
	m.exited = make(chan struct{})
	go m.run(ctx, m.exited)
}

// close stops the migrator goroutine and waits for it (before the store
// closes).
func (m *migrator) close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
	}
	running, exited := m.running, m.exited
	m.mu.Unlock()
	if running {
		<-exited
	}
}

// idle says whether no background chunk is under way; with an empty table
// that means every moved key is here and gone from its old owner.
func (m *migrator) idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.inChunk
}

// run pulls chunks while the table lists keys and migration is wanted,
// starting each no earlier than the budget allows after the previous one.
func (m *migrator) run(ctx context.Context, exited chan struct{}) {
	defer func() {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
		close(exited)
	}()
	next := time.Now()
	for m.want.Load() {
		if d := time.Until(next); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return
			case <-m.stop:
				timer.Stop()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		default:
		}
		start := time.Now()
		moved, ok, err := m.backgroundChunk(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.t.fail(fmt.Errorf("task %s: background migration: %w", m.t.id, err))
			}
			return
		}
		if !ok {
			return // nothing left; the task goroutine kicks again on new entries
		}
		// A chunk is recorded like a batch: the migration's work shows in
		// the batch-time histogram instead of hiding behind the batches.
		m.t.stats.observeBatch(time.Since(start))
		next = start.Add(time.Duration(float64(moved) / float64(m.rate) * float64(time.Second)))
	}
}

// pick chooses the (bucket, owner) pair to pull next: of those the table
// still lists, the one whose bucket received the most records here (the
// task's per-bucket counts, bucketIn; no per-key counts are kept), the
// lowest bucket on ties.
func (m *migrator) pick() (segmentID, control.TaskRef, bool, error) {
	heads := m.ks.klt.Heads()
	if len(heads) == 0 {
		return segmentID{}, control.TaskRef{}, false, nil
	}
	best := 0
	if counts := m.t.bucketIn.Load(); counts != nil {
		var most uint64
		for i, h := range heads {
			if h.Bucket < len(*counts) {
				if n := (*counts)[h.Bucket].Load(); n > most {
					best, most = i, n
				}
			}
		}
	}
	h := heads[best]
	ref, ok := m.ks.owners.Load(h.Owner)
	if !ok {
		return segmentID{}, control.TaskRef{}, false, fmt.Errorf("key lookup table names owner %q with no known address", h.Owner)
	}
	return segmentID{bucket: h.Bucket, owner: h.Owner}, ref.(control.TaskRef), true, nil
}

// backgroundChunk runs one peek, commit and drop (see migrator) and
// returns the state bytes peeked; ok is false when the table lists
// nothing.
func (m *migrator) backgroundChunk(ctx context.Context) (moved int, ok bool, err error) {
	m.chunkMu.Lock()
	defer m.chunkMu.Unlock()
	seg, ref, ok, err := m.pick()
	if !ok || err != nil {
		return 0, false, err
	}
	ks := m.ks
	m.mu.Lock()
	m.peekGen++
	gen := m.peekGen
	m.peeking, m.inChunk = true, true
	m.mu.Unlock()
	defer m.endChunk(gen)
	limit := ks.pullPage
	if ks.gradual > 0 {
		limit = ks.gradual
	}
	keys, vals, more, next, err := m.t.w.pullState(ctx, m.t.jobID, ref, seg.bucket, limit, m.chunkBytes, len(ks.names), m.resume[seg], exchange.FetchPeek, "")
	if err != nil {
		return 0, false, err
	}
	for _, v := range vals {
		moved += len(v)
	}
	committed, err := m.commit(seg, keys, vals)
	if err != nil {
		return moved, false, err
	}
	m.endPeek(gen)
	if len(committed) > 0 {
		skeys := make([][]byte, 0, len(committed)*len(ks.names))
		var kb stateKeyBuf
		for _, u := range committed {
			for _, n := range ks.names {
				skeys = append(skeys, kb.keyInBucket(ks, seg.bucket, n, u))
			}
		}
		if err := m.t.w.dropState(ctx, m.t.jobID, ref, skeys, ks.lastCheckpoint()); err != nil {
			return moved, false, err
		}
	}
	m.mu.Lock()
	for _, u := range committed {
		delete(m.committed, string(u))
	}
	m.mu.Unlock()
	if more {
		m.resume[seg] = next
	} else {
		// What the owner still holds of the bucket is claimed by the batch
		// in flight, which takes it: the pair's entries may go.
		ks.klt.DropSegment(seg.bucket, seg.owner)
		delete(m.resume, seg)
	}
	return moved, true, nil
}

// commit stores the peeked keys no batch claimed, commitStep at a time,
// and returns them.
func (m *migrator) commit(seg segmentID, keys, vals [][]byte) ([][]byte, error) {
	ks := m.ks
	n := len(ks.names)
	var done [][]byte
	var kb stateKeyBuf
	for lo := 0; lo < len(keys); lo += commitStep {
		hi := min(lo+commitStep, len(keys))
		var kvs []statesvc.KV
		var step [][]byte
		var slots, bytes uint64
		m.mu.Lock()
		for i := lo; i < hi; i++ {
			if _, claimed := m.claims[string(keys[i])]; claimed {
				continue
			}
			for si, name := range ks.names {
				if v := vals[i*n+si]; v != nil {
					kvs = append(kvs, statesvc.KV{Key: kb.keyInBucket(ks, seg.bucket, name, keys[i]), Value: v})
					slots++
					bytes += uint64(len(keys[i]) + len(v))
				}
			}
			step = append(step, keys[i])
			m.committing[string(keys[i])] = struct{}{}
		}
		stepDone := make(chan struct{})
		m.stepDone = stepDone
		m.mu.Unlock()
		// Past the value cache: the task has not read these keys yet, and
		// they would evict those it works on.
		ks.localIdx.addKVs(kvs)
		err := statesvc.PutCold(ks.store, kvs)
		m.mu.Lock()
		if err == nil {
			ks.klt.RemoveKeys(seg.owner, step)
			for _, u := range step {
				m.committed[string(u)] = struct{}{}
			}
		}
		clear(m.committing)
		m.stepDone = nil
		close(stepDone)
		m.mu.Unlock()
		if err != nil {
			return done, fmt.Errorf("store migrated keys of bucket %d from %s: %w", seg.bucket, seg.owner, err)
		}
		ks.keysFetched.Add(slots)
		ks.bytesMoved.Add(bytes)
		done = append(done, step...)
	}
	return done, nil
}

// endPeek ends peek gen's commit: the claims released while it was in
// flight may go.
func (m *migrator) endPeek(gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peeking = false
	for k, g := range m.claims {
		if g != 0 && g <= gen {
			delete(m.claims, k)
		}
	}
}

// endChunk ends a chunk, also one that failed (then the task fails).
func (m *migrator) endChunk(gen uint64) {
	m.endPeek(gen)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inChunk = false
	clear(m.committed)
}

// lookupBatch is KLT.LookupBatchRefs for a batch's keys (dst empty) that
// counts committed keys as local and claims the remote ones while the
// migrator runs, or always with claim (a batch whose fetch may still be
// out when the migrator starts: fetch_pipeline.go); if one of them is
// being written by a commit step, it waits for that step and looks up
// again.
func (m *migrator) lookupBatch(keys [][]byte, dst []uint32, claim bool) (refs []uint32, owners []string) {
	for {
		m.mu.Lock()
		refs, owners = m.ks.klt.LookupBatchRefs(keys, dst)
		if !m.running && !claim {
			// Only the task goroutine starts it, and not while this batch runs.
			m.mu.Unlock()
			return refs, owners
		}
		if wait := m.writingAny(keys, refs); wait != nil {
			m.mu.Unlock()
			<-wait
			continue
		}
		for i, r := range refs {
			if r == 0 {
				continue
			}
			if _, ok := m.committed[string(keys[i])]; ok {
				refs[i] = 0
				continue
			}
			m.claims[string(keys[i])] = 0
		}
		m.mu.Unlock()
		return refs, owners
	}
}

// writingAny returns the current commit step's channel if it writes one of
// the keys listed as remote (caller holds mu), else nil.
func (m *migrator) writingAny(keys [][]byte, refs []uint32) chan struct{} {
	if len(m.committing) == 0 {
		return nil
	}
	for i, r := range refs {
		if r == 0 {
			continue
		}
		if _, ok := m.committing[string(keys[i])]; ok {
			return m.stepDone
		}
	}
	return nil
}

// lookupKey is lookupBatch for one key (watermark timers).
func (m *migrator) lookupKey(key []byte) (string, bool) {
	for {
		m.mu.Lock()
		owner, ok := m.ks.klt.Lookup(key)
		if !ok || !m.running {
			m.mu.Unlock()
			return owner, ok
		}
		if _, w := m.committing[string(key)]; w {
			wait := m.stepDone
			m.mu.Unlock()
			<-wait
			continue
		}
		defer m.mu.Unlock()
		if _, c := m.committed[string(key)]; c {
			return "", false
		}
		m.claims[string(key)] = 0
		return owner, true
	}
}

// release ends a batch's fetches: the lookup entries of the keys it took
// go, and its claims (every key in remote) end or, while a peek is in
// flight, wait for that peek's commit.
func (m *migrator) release(remote, taken map[string][][]byte) {
	if len(remote) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for owner, keys := range taken {
		m.ks.klt.RemoveKeys(owner, keys)
	}
	if len(m.claims) == 0 {
		return
	}
	for _, keys := range remote {
		for _, k := range keys {
			if _, ok := m.claims[string(k)]; !ok {
				continue
			}
			if m.peeking {
				m.claims[string(k)] = m.peekGen
			} else {
				delete(m.claims, string(k))
			}
		}
	}
}

// holdCommits runs fn (a checkpoint part's or a snapshot's capture of the
// store and the table) with no commit step in between.
func (m *migrator) holdCommits(fn func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fn()
}

// forgetBuckets drops the resume keys of buckets that leave the task
// (caller holds chunkMu): if one comes back, its old owner may hold new
// keys before the old resume key.
func (m *migrator) forgetBuckets(buckets []int) {
	for seg := range m.resume {
		for _, b := range buckets {
			if seg.bucket == b {
				delete(m.resume, seg)
				break
			}
		}
	}
}
