package nexmark

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"koala/dataplane"
	"koala/queries"
)

// Artifact query names
//
// The Koala artifact's configs name the Nexmark queries "nexmark_query<N>".
// Each is registered under that name too: nexmark_query1 is q1 with the
// operators the artifact's hello-world config names (source → mapper →
// sink), its mapper keyed and stateful so that a rescale of it moves state;
// the others are the same dataflow as "nexmark-q<N>".

// ArtifactName is the artifact's name of Nexmark query q ("q1" …).
func ArtifactName(q string) string { return "nexmark_query" + q[1:] }

// ConvertedState is nexmark_query1's mapper state: the euro price of each
// bid, by the bid's record key (its event number), 8 bytes little-endian.
const ConvertedState = "converted"

// BuildArtifactQ1 returns nexmark_query1 named name, ending in sink.
func BuildArtifactQ1(name string, sink Sink) *dataplane.QueryBuilder {
	b := dataplane.NewQuery(name).Describe("Nexmark q1 (artifact operators source → mapper → sink): bids with prices converted to euros, each kept in the mapper's keyed state")
	sink(b.Source("source", 1).Process("mapper", func(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
		log := ctx.Logger
		if log == nil {
			log = slog.Default()
		}
		return &q1Mapper{log: log}, nil
	}, true))
	return b
}

func init() {
	for _, q := range queryNames {
		var b *dataplane.QueryBuilder
		if q == "q1" {
			b = BuildArtifactQ1(ArtifactName(q), CountSink)
		} else {
			var err error
			if b, err = Build(q, ArtifactName(q), CountSink); err != nil {
				panic(err)
			}
		}
		if err := queries.Register(queries.Query{Name: b.Name(), Description: b.Description(), Operators: b.MustBuild(), Unchecked: unchecked(q), Unordered: unordered(q)}); err != nil {
			panic(err)
		}
	}
}

// q1Mapper is q1 as a keyed stateful operator.
type q1Mapper struct {
	log                       *slog.Logger
	parsed, malformed, others atomic.Uint64
	told                      time.Time
}

func (m *q1Mapper) StateNames() []string { return []string{ConvertedState} }

func (m *q1Mapper) ProcessBatch([]dataplane.Record, dataplane.Emit) error {
	return errors.New("mapper called without keyed state (its input must be keyed)")
}

func (m *q1Mapper) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		e, err := Parse(r.Value)
		if err != nil {
			n := m.malformed.Add(1)
			if now := time.Now(); now.Sub(m.told) >= 10*time.Second {
				m.log.Warn("skipping malformed nexmark records", "total", n, "partition", r.Partition, "offset", r.Offset, "err", err)
				m.told = now
			}
			continue
		}
		m.parsed.Add(1)
		if e.Bid == nil {
			m.others.Add(1)
			continue
		}
		b := *e.Bid
		b.Price = b.Price * DollarToEuroNum / DollarToEuroDen
		st.Put(ConvertedState, r.Key, binary.LittleEndian.AppendUint64(nil, uint64(b.Price)))
		r.Key, r.Value = itoa(b.Auction), encodeBid(&b)
		emit(r)
	}
	return nil
}

func (m *q1Mapper) Counters() map[string]uint64 {
	return map[string]uint64{"malformed_records": m.malformed.Load(), "parsed_records": m.parsed.Load(), "skipped_non_bids": m.others.Load()}
}
