package traces

import (
	"fmt"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Twitch generator parameters.
const (
	// TwitchDefaultSkew is the Zipf exponent over streams when Skew is 0:
	// a few channels draw most viewers.
	TwitchDefaultSkew = 1.2
	// TwitchUsersPerStream sets the users: NumKeys × it.
	TwitchUsersPerStream = 10
	maxTwitchStreams     = produce.MaxZipfKeys / TwitchUsersPerStream
)

// TwitchGenerator makes viewing events: users take turns (event n is user
// n mod users' next event); each user alternates entering a stream drawn
// from a Zipf over NumKeys streams and leaving it. Event n depends only on
// (seed, n).
type TwitchGenerator struct {
	streams keyIndex
	seed    int64
	users   int64
	// seq: the warm-up stream, in which event n is user n entering stream
	// n mod NumKeys, so NumKeys events give every stream its state.
	seq bool
}

// NewTwitchGenerator returns the generator of req (NumKeys streams, Skew, Seed).
func NewTwitchGenerator(req control.ProduceRequest) (*TwitchGenerator, error) {
	z, err := traceKeys(Twitch, req, TwitchDefaultSkew, maxTwitchStreams)
	if err != nil {
		return nil, err
	}
	return &TwitchGenerator{streams: z, seed: req.Seed, users: int64(req.NumKeys) * TwitchUsersPerStream, seq: req.Sequential}, nil
}

// TwitchStreamID is the id of stream index k.
func TwitchStreamID(k int) string { return fmt.Sprintf("s%07d", k) }

// Event is event n.
func (g *TwitchGenerator) Event(n int64) ViewEvent {
	u, k := n%g.users, n/g.users
	var s int
	if g.seq {
		s, k = g.streams.Index(g.seed, n), 0
	} else {
		s = g.streams.Index(g.seed, u<<32|k/2)
	}
	typ := TwitchEnter
	if k%2 == 1 {
		typ = TwitchLeave
	}
	// Times grow with n; a user's events stay in order (jitter < users).
	jitter := int64((uint64(u)*0x9e3779b97f4a7c15 ^ uint64(k)*0xbf58476d1ce4e5b9) % uint64(g.users/2+1))
	return ViewEvent{User: fmt.Sprintf("u%08d", u), Stream: TwitchStreamID(s), Streamer: fmt.Sprintf("streamer%d", s), Time: n + jitter, Type: typ}
}

// Next fills r with event n keyed by its user.
func (g *TwitchGenerator) Next(n int64, r *dataplane.Record) {
	e := g.Event(n)
	r.Key = append(r.Key[:0], e.User...)
	r.Value = e.CSV()
	r.EventTime = time.Now().UnixNano()
	r.Partition, r.Offset = 0, 0
}

func init() {
	registerTrace(&trace{name: Twitch, header: true, key: twitchKey}, func(req control.ProduceRequest) (produce.Generator, error) {
		return NewTwitchGenerator(req)
	})
}
