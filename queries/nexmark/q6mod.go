package nexmark

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/queries"
)

// Nexmark q6 modified (the artifact's query6Mod)
//
// The shape the artifact measures its large-state results with: closed
// auctions (the ClosedAuction stream, generator_closed.go) go from the
// source straight to a stateful mapper keyed by seller, which emits, for
// every closed auction, the average winning price of the seller's last
// Q6ModWindow closed auctions (fewer while the seller has fewer), and the
// sink takes those. Unlike "nexmark-q6", nothing closes auctions here and a
// seller's state does not grow: it is one value of fixed size,
//
//	[0, 8)    closed auctions of the seller so far (uint64, little-endian)
//	[8, 88)   the last Q6ModWindow prices, a ring: closed auction number c
//	          (from 0) writes slot c mod Q6ModWindow (int64, little-endian)
//	[88, …)   DummyFieldSize bytes of pad (job parameter, default 0)
//
// so 88 + DummyFieldSize bytes per seller. The pad is pseudo-random from
// the seller id (Pebble's compression cannot shrink it, and a state is the
// same whichever task built it) and is written once, at the seller's first
// closed auction, as the artifact does.
//
// One output per input, keyed by seller like the input, so the sink ledger
// checks every record once and in order per seller. Records that are not a
// closed auction, or whose key is not their seller's id (the mapper's
// state is by record key, so the producer must key by seller), are counted
// as malformed and handed to the dead-letter path.

// Query names of q6 modified: the artifact's and the short one.
const (
	ArtifactQ6Mod = "nexmark_query6_modified"
	Q6Mod         = "nexmark-q6mod"
)

// q6 modified parameters.
const (
	// Q6ModWindow is how many of a seller's last prices are averaged.
	Q6ModWindow = 10
	// SellerWindowState is the mapper's state: one fixed-size value per
	// seller (layout above).
	SellerWindowState = "sellerWindow"
	// MaxQ6ModDummyFieldSize bounds the pad, so a state value stays a
	// small fraction of a state-migration chunk.
	MaxQ6ModDummyFieldSize = 1 << 20
	// q6ModHead is the state's bytes before the pad.
	q6ModHead = 8 * (1 + Q6ModWindow)
)

// Q6ModStateBytes is the size of every seller's state under pad bytes of
// DummyFieldSize.
func Q6ModStateBytes(pad int) int { return q6ModHead + pad }

// Q6ModResult is q6 modified's output value; the record key is the seller.
type Q6ModResult struct {
	Seller  int64   `json:"seller"`
	Average float64 `json:"average"` // cents
}

// encodeQ6ModResult and DecodeQ6ModResult (results_codec.go) are the
// output's one encoding: binary, 1 + seller varint + 8 bytes.
func encodeQ6ModResult(seller int64, avg float64) []byte {
	return Q6ModResult{Seller: seller, Average: avg}.appendBinary(make([]byte, 0, resultCap))
}

// BuildQ6Mod returns q6 modified named name, ending in sink.
func BuildQ6Mod(name string, sink Sink) *dataplane.QueryBuilder {
	b := dataplane.NewQuery(name).Describe(fmt.Sprintf("Nexmark q6* as the artifact's query6Mod (source → statefulMapper → sink): "+
		"closed auctions keyed by seller; per seller a fixed %d + DummyFieldSize bytes of state (count, last %d prices, pad); "+
		"each closed auction emits its seller's average price over the last %d", q6ModHead, Q6ModWindow, Q6ModWindow))
	sink(b.Source("source", 1).Process("statefulMapper", newQ6ModMapper, true))
	return b
}

func init() {
	for _, name := range []string{ArtifactQ6Mod, Q6Mod} {
		b := BuildQ6Mod(name, CountSink)
		if err := queries.Register(queries.Query{Name: b.Name(), Description: b.Description(), Operators: b.MustBuild()}); err != nil {
			panic(err)
		}
	}
}

// q6ModMapper is the keyed stateful mapper of q6 modified.
type q6ModMapper struct {
	pad  int
	dead *kafkaio.DeadLetters
	key  []byte // scratch: the seller id as a record key
	// malformed counts every rejected record; notClosed and keyNotSeller
	// the ones among them that parsed.
	parsed, malformed, notClosed, keyNotSeller atomic.Uint64
}

func newQ6ModMapper(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
	pad, err := control.IntParam(ctx.Job, control.ParamDummyFieldSize, 0, 0, MaxQ6ModDummyFieldSize, "bytes")
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", ctx.Spec.Name, err)
	}
	dead := ctx.DeadLetters
	if dead == nil { // built outside a worker
		dead = kafkaio.NewTestDeadLetters(ctx.Spec.Name)
	}
	return &q6ModMapper{pad: pad, dead: dead}, nil
}

func (m *q6ModMapper) StateNames() []string { return []string{SellerWindowState} }

func (m *q6ModMapper) ProcessBatch([]dataplane.Record, dataplane.Emit) error {
	return errors.New("statefulMapper called without keyed state (its input must be keyed)")
}

func (m *q6ModMapper) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		ca, err := m.closedAuction(r)
		if err != nil {
			m.malformed.Add(1)
			m.dead.Reject(r, kafkaio.ReasonMalformed, err)
			continue
		}
		m.parsed.Add(1)
		next, avg, err := advanceSeller(st.Get(SellerWindowState, r.Key), ca.Seller, ca.Price, m.pad)
		if err != nil {
			return fmt.Errorf("statefulMapper: seller %s: %w", r.Key, err)
		}
		st.PutOwned(SellerWindowState, r.Key, next) // made by advanceSeller for this write
		r.Value = encodeQ6ModResult(ca.Seller, avg)
		emit(r)
	}
	return nil
}

// closedAuction is r's closed auction, or why r is not this query's input.
func (m *q6ModMapper) closedAuction(r dataplane.Record) (*ClosedAuction, error) {
	e, err := Parse(r.Value)
	if err != nil {
		return nil, err
	}
	if e.ClosedAuction == nil {
		m.notClosed.Add(1)
		return nil, fmt.Errorf("%w: a %s event, where %s reads closed auctions only", ErrMalformed, e.Kind(), ArtifactQ6Mod)
	}
	m.key = strconv.AppendInt(m.key[:0], e.ClosedAuction.Seller, 10)
	if !bytes.Equal(r.Key, m.key) {
		m.keyNotSeller.Add(1)
		return nil, fmt.Errorf("%w: record key %q is not the closed auction's seller %d (the state is kept by record key, so closed auctions must be keyed by seller)", ErrMalformed, r.Key, e.ClosedAuction.Seller)
	}
	return e.ClosedAuction, nil
}

func (m *q6ModMapper) Counters() map[string]uint64 {
	return map[string]uint64{
		"parsed_records": m.parsed.Load(), "malformed_records": m.malformed.Load(),
		"not_closed_auctions": m.notClosed.Load(), "key_not_seller": m.keyNotSeller.Load(),
	}
}

// advanceSeller is the mapper's decision for one closed auction of seller
// at price: the seller's next state and the average to emit. old is the
// stored state, empty for a seller not seen yet, which starts with no
// prices and a fresh pad of pad bytes; a stored state keeps its pad as it
// is, so each seller's state keeps the size it got at its first closed
// auction, whatever later jobs set DummyFieldSize to. old is not modified
// (state values are shared with the runtime).
func advanceSeller(old []byte, seller, price int64, pad int) (next []byte, avg float64, err error) {
	switch {
	case len(old) == 0:
		next = make([]byte, q6ModHead+pad)
		fillPad(next[q6ModHead:], seller)
	case len(old) < q6ModHead:
		return nil, 0, fmt.Errorf("state %s is %d bytes, want at least %d (a count and %d prices)", SellerWindowState, len(old), q6ModHead, Q6ModWindow)
	default:
		next = bytes.Clone(old)
	}
	count := binary.LittleEndian.Uint64(next)
	binary.LittleEndian.PutUint64(next[8+8*(count%Q6ModWindow):], uint64(price))
	count++
	binary.LittleEndian.PutUint64(next, count)
	n := min(count, Q6ModWindow)
	var sum int64
	for i := range n {
		sum += int64(binary.LittleEndian.Uint64(next[8+8*i:]))
	}
	return next, float64(sum) / float64(n), nil
}
