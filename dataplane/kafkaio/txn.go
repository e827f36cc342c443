package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"koala/dataplane/checkpoint"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional Kafka sink: exactly-once output with checkpoints.
//
// When the job takes checkpoints (it names a ParamCheckpointStore), a
// Kafka sink task writes inside Kafka transactions and commits them in two
// phases tied to the checkpoints:
//
//  1. pre-commit, at the checkpoint barrier: every record before the
//     barrier is acknowledged (ProduceSync per batch), the open
//     transaction's transactional id, producer id and epoch go into the
//     task's part of the checkpoint; records after the barrier are held in
//     memory, since a producer has one transaction at a time;
//  2. commit, when the controller reports the checkpoint complete
//     (VerbCheckpointCommit, sent after the manifest is written): the
//     transaction is committed, a new one begins on the other
//     transactional id and the held records are written into it.
//
// A checkpoint that failed (VerbCheckpointAbort, or found without a
// manifest when the next barrier arrives) does not end the transaction:
// the held records join it, and the next completed checkpoint commits
// both. Before a pre-commit the sink asks the store whether the previous
// one's checkpoint completed, so a lost notification only delays output.
//
// Recovery. A restored sink task first commits the transaction its
// checkpoint part names (an EndTxn with the saved producer id and epoch:
// the checkpoint completed, so those records are part of the output; if
// the commit notification had already done it, the broker answers the
// retry with success), then initialises both of its transactional ids,
// which fences every producer of the task's previous incarnation and
// aborts the transaction it left open: the records after the checkpoint,
// which the sources replay, never become visible to read_committed
// consumers. The ids are koala/<job>/<task>/<0|1>, stable across
// recoveries since a recovered task keeps its id. Two ids alternate so
// that the transaction recommitted on restore cannot be confused with a
// later one: with one transaction at a time, the id of the checkpoint's
// transaction is reused only after a later checkpoint completed, and
// recovery always uses the latest one.
//
// Latency cost. Output becomes visible to read_committed consumers only
// when the checkpoint after it completes: records wait on average half a
// checkpoint interval plus the checkpoint's duration (align, snapshot,
// manifest, notification), and at most a whole interval more. Records
// arriving between a barrier and its completion are held in the sink's
// memory for that time. read_uncommitted consumers see records at once,
// including those of transactions that are later aborted. At the end of
// the input (the EOS barrier) the sink commits what it holds. Without
// checkpoints the sink is at least once and writes without transactions.
//
// Limits: a transaction stays open for up to kafkaSinkTxnTimeout; a
// checkpoint that has not completed by then loses the broker's
// transaction and the commit fails the task. Reconfiguring the sink
// operator itself is not covered: a stopped sink task leaves its open
// transaction to time out.

// kafkaSinkTxnTimeout is the transaction timeout the sink asks for: longer
// than several checkpoint intervals, below the brokers' default maximum
// (transaction.max.timeout.ms, 15 min).
const kafkaSinkTxnTimeout = 5 * time.Minute

// checkpointTxnFile holds a transactional sink's part of a checkpoint.
const checkpointTxnFile = "kafka_txn.json"

// txnPart is a transactional sink's part of a checkpoint.
type txnPart struct {
	// Slot is the transactional id the records after the barrier go to.
	Slot int `json:"slot"`
	// Pending is the transaction holding the records before the barrier
	// that no earlier completed checkpoint committed; nil when there are
	// none.
	Pending *txnRef `json:"pending,omitempty"`
}

// txnRef names one broker-side transaction.
type txnRef struct {
	CheckpointID    string `json:"checkpoint_id"`
	TransactionalID string `json:"transactional_id"`
	Slot            int    `json:"slot"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
}

// Txn is the transactional state of one Kafka sink task; it is used
// from the task goroutine only.
type Txn struct {
	prefix  string    // transactional ids are prefix/0 and prefix/1
	opts    []kgo.Opt // client options without the transactional id
	clients [2]*kgo.Client
	slot    int
	inTxn   bool          // clients[slot] has begun a transaction
	pending *txnRef       // pre-committed, waiting for its checkpoint
	held    []*kgo.Record // records after the pending barrier
	// completed reports whether a checkpoint of the job has its manifest.
	completed func(ctx context.Context, checkpointID string) (bool, error)
}

// NewTxn makes the transactional state of a sink whose transactional ids
// are prefix/0 and prefix/1; opts are its client options without a
// transactional id, completed says whether a checkpoint of the job has its
// manifest (the store's Completed).
func NewTxn(prefix string, opts []kgo.Opt, completed func(ctx context.Context, checkpointID string) (bool, error)) *Txn {
	return &Txn{prefix: prefix, opts: opts, completed: completed}
}

func (x *Txn) txnID(slot int) string { return fmt.Sprintf("%s/%d", x.prefix, slot) }

func (x *Txn) client(slot int) (*kgo.Client, error) {
	if x.clients[slot] == nil {
		cl, err := kgo.NewClient(append(x.opts, kgo.TransactionalID(x.txnID(slot)), kgo.TransactionTimeout(kafkaSinkTxnTimeout))...)
		if err != nil {
			return nil, fmt.Errorf("transactional client %s: %w", x.txnID(slot), err)
		}
		x.clients[slot] = cl
	}
	return x.clients[slot], nil
}

// Write produces recs into the open transaction, or holds them while a
// pre-committed transaction waits for its checkpoint.
func (x *Txn) Write(ctx context.Context, recs []*kgo.Record) error {
	if x.pending != nil {
		for _, r := range recs {
			x.held = append(x.held, &kgo.Record{Key: clone(r.Key), Value: clone(r.Value), Timestamp: r.Timestamp})
		}
		return nil
	}
	return x.produce(ctx, recs)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

func (x *Txn) produce(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	cl, err := x.client(x.slot)
	if err != nil {
		return err
	}
	if !x.inTxn {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("begin transaction %s: %w", x.txnID(x.slot), err)
		}
		x.inTxn = true
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("transaction %s: %w", x.txnID(x.slot), err)
	}
	return nil
}

// PreCommit ends the records of checkpoint id: it settles the previous
// pre-commit, names the open transaction in the part written to dir and
// holds later records until the checkpoint's outcome is known.
func (x *Txn) PreCommit(ctx context.Context, id, dir string) (uint64, error) {
	if err := x.settle(ctx); err != nil {
		return 0, err
	}
	if x.inTxn {
		cl := x.clients[x.slot]
		if err := cl.Flush(ctx); err != nil {
			return 0, fmt.Errorf("flush transaction %s: %w", x.txnID(x.slot), err)
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			return 0, fmt.Errorf("producer id of %s: %w", x.txnID(x.slot), err)
		}
		x.pending = &txnRef{CheckpointID: id, TransactionalID: x.txnID(x.slot), Slot: x.slot, ProducerID: pid, ProducerEpoch: epoch}
	}
	part := txnPart{Slot: x.slot, Pending: x.pending}
	if x.pending != nil {
		part.Slot = 1 - x.slot
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("kafka transaction: %w", err)
	}
	path := filepath.Join(dir, checkpointTxnFile)
	if err := checkpoint.WriteJSONAtomic(path, part); err != nil {
		return 0, fmt.Errorf("kafka transaction: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("kafka transaction: %w", err)
	}
	return uint64(info.Size()), nil
}

// settle resolves a pre-commit whose notification has not arrived, from
// the store: its checkpoint completed (commit) or not (the transaction
// goes on with the held records). It is called when the next barrier
// arrives or a failure is reported, by when the outcome is final.
func (x *Txn) settle(ctx context.Context) error {
	if x.pending == nil {
		return nil
	}
	done, err := x.completed(ctx, x.pending.CheckpointID)
	if err != nil {
		return fmt.Errorf("outcome of checkpoint %s: %w", x.pending.CheckpointID, err)
	}
	if done {
		return x.commitPending(ctx)
	}
	x.pending = nil
	held := x.held
	x.held = nil
	return x.produce(ctx, held)
}

// Commit commits the pre-committed transaction when checkpoint id is its
// checkpoint or a later one (ids sort like their sequence numbers).
func (x *Txn) Commit(ctx context.Context, id string) error {
	if x.pending == nil || x.pending.CheckpointID > id {
		return nil
	}
	return x.commitPending(ctx)
}

func (x *Txn) commitPending(ctx context.Context) error {
	p := x.pending
	if err := x.clients[x.slot].EndTransaction(ctx, kgo.TryCommit); err != nil {
		if !unconfirmed(err) {
			return fmt.Errorf("commit transaction %s of checkpoint %s: %w", p.TransactionalID, p.CheckpointID, err)
		}
		if err := x.commitUnconfirmed(ctx, *p, err); err != nil {
			return err
		}
	}
	x.inTxn, x.pending = false, nil
	x.slot = 1 - x.slot
	held := x.held
	x.held = nil
	return x.produce(ctx, held)
}

// commitRetryWithin bounds how long a commit whose outcome is unknown is
// retried: a broker restart takes tens of seconds; the transaction itself
// lives kafkaSinkTxnTimeout.
const commitRetryWithin = 2 * time.Minute

// unconfirmed tells whether a failed EndTransaction may have left the
// transaction open, to be committed by a retry: the broker was not
// reached or did not answer (a restart), or answered with a retriable
// error. franz-go refuses to retry such a commit itself (its documented
// retry aborts, which would drop records of a completed checkpoint).
func unconfirmed(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.OperationNotAttempted)
	}
	return true
}

// commitUnconfirmed commits the pre-committed transaction p after its
// producer's commit failed with an unknown outcome (first), by id as a
// restored task does (recommit; a transaction already committed answers
// with success), retrying until the broker answers. The producer's
// client is then replaced: it still believes the transaction open.
func (x *Txn) commitUnconfirmed(ctx context.Context, p txnRef, first error) error {
	deadline := time.Now().Add(commitRetryWithin)
	err := first
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = x.recommit(rctx, p)
		cancel()
		if err == nil {
			break
		}
		if !unconfirmed(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("commit transaction %s of checkpoint %s: unconfirmed (%v), retried for %s: %w", p.TransactionalID, p.CheckpointID, first, commitRetryWithin, err)
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	x.clients[x.slot].Close()
	x.clients[x.slot] = nil
	return nil
}

// Abort is the report that checkpoint id failed.
func (x *Txn) Abort(ctx context.Context, id string) error {
	if x.pending == nil || x.pending.CheckpointID != id {
		return nil
	}
	return x.settle(ctx)
}

// Finish commits everything at the end of the input.
func (x *Txn) Finish(ctx context.Context) error {
	if err := x.settle(ctx); err != nil {
		return err
	}
	if !x.inTxn {
		return nil
	}
	cl := x.clients[x.slot]
	// Known before the commit, to commit by id if its outcome is unknown.
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id of %s: %w", x.txnID(x.slot), err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if !unconfirmed(err) {
			return fmt.Errorf("commit transaction %s at the end of the input: %w", x.txnID(x.slot), err)
		}
		ref := txnRef{CheckpointID: "(end of input)", TransactionalID: x.txnID(x.slot), Slot: x.slot, ProducerID: pid, ProducerEpoch: epoch}
		if err := x.commitUnconfirmed(ctx, ref, err); err != nil {
			return err
		}
	}
	x.inTxn = false
	x.slot = 1 - x.slot
	return nil
}

// Restore commits the transaction the checkpoint part in dir names, then
// fences the task's previous incarnation on both transactional ids.
func (x *Txn) Restore(ctx context.Context, dir string) error {
	var part txnPart
	ok, err := checkpoint.ReadJSON(filepath.Join(dir, checkpointTxnFile), &part)
	if err != nil {
		return fmt.Errorf("kafka transaction: %w", err)
	}
	if !ok {
		return fmt.Errorf("kafka transaction: %s has no %s (the checkpoint was taken without transactions)", dir, checkpointTxnFile)
	}
	if part.Slot != 0 && part.Slot != 1 {
		return fmt.Errorf("kafka transaction: %s: slot %d (allowed: 0 or 1)", checkpointTxnFile, part.Slot)
	}
	if p := part.Pending; p != nil {
		if err := x.recommit(ctx, *p); err != nil {
			return err
		}
	}
	for slot := range x.clients {
		cl, err := x.client(slot)
		if err != nil {
			return err
		}
		if _, _, err := cl.ProducerID(ctx); err != nil {
			return fmt.Errorf("fence earlier producers of %s: %w", x.txnID(slot), err)
		}
	}
	x.slot, x.inTxn, x.pending, x.held = part.Slot, false, nil, nil
	return nil
}

// recommit ends transaction p with a commit, as its producer would have.
func (x *Txn) recommit(ctx context.Context, p txnRef) error {
	cl, err := kgo.NewClient(x.opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.TransactionalID, p.ProducerID, p.ProducerEpoch, true
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("commit transaction %s (producer %d, epoch %d) of completed checkpoint %s: %w; its records would be lost",
			p.TransactionalID, p.ProducerID, p.ProducerEpoch, p.CheckpointID, err)
	}
	return nil
}

// Close aborts an open transaction that no checkpoint covers (a
// pre-committed one is left for a restored task to commit) and closes
// the clients.
func (x *Txn) Close() error {
	var err error
	if x.inTxn && x.pending == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if e := x.clients[x.slot].EndTransaction(ctx, kgo.TryAbort); e != nil && !errors.Is(e, context.DeadlineExceeded) {
			err = fmt.Errorf("abort transaction %s: %w", x.txnID(x.slot), e)
		}
		cancel()
	}
	for _, cl := range x.clients {
		if cl != nil {
			cl.Close()
		}
	}
	return err
}
