package traces

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"koala/dataplane"
)

// Twitch event types.
const (
	TwitchEnter = "ENTER"
	TwitchLeave = "LEAVE"
)

// ViewEvent is one line of the Twitch viewing trace.
type ViewEvent struct {
	User, Stream, Streamer string
	Time                   int64 // seconds
	Type                   string
}

// CSV renders e in the trace's column layout.
func (e ViewEvent) CSV() []byte {
	return fmt.Appendf(nil, "%s,%s,%s,%d,%s", e.User, e.Stream, e.Streamer, e.Time, e.Type)
}

// ParseViewEvent parses one trace line (not the header).
func ParseViewEvent(line []byte) (ViewEvent, error) {
	f := bytes.Split(line, []byte(","))
	if len(f) != 5 {
		return ViewEvent{}, malformed("twitch: %d columns, want 5 (user id,stream id,streamer name,time,event type)", len(f))
	}
	e := ViewEvent{User: string(f[0]), Stream: string(f[1]), Streamer: string(f[2])}
	if e.User == "" || e.Stream == "" {
		return e, malformed("twitch: empty user or stream id")
	}
	var err error
	if e.Time, err = strconv.ParseInt(string(f[3]), 10, 64); err != nil {
		return e, malformed("twitch: time %q is not a whole number", f[3])
	}
	switch t := string(bytes.ToUpper(f[4])); t {
	case TwitchEnter, TwitchLeave:
		e.Type = t
	default:
		return e, malformed("twitch: event type %q, want %s or %s", f[4], TwitchEnter, TwitchLeave)
	}
	return e, nil
}

func twitchKey(line []byte) ([]byte, error) {
	e, err := ParseViewEvent(line)
	return []byte(e.User), err
}

// parseInts parses a record value of exactly n comma-separated integers.
func parseInts(v []byte, n int, what string) ([]int64, error) {
	f := bytes.Split(v, []byte(","))
	if len(f) != n {
		return nil, malformed("twitch: %s record %q has %d fields, want %d", what, v, len(f), n)
	}
	out := make([]int64, n)
	for i, x := range f {
		var err error
		if out[i], err = strconv.ParseInt(string(x), 10, 64); err != nil {
			return nil, malformed("twitch: %s record %q: field %d is not a whole number", what, v, i+1)
		}
	}
	return out, nil
}

// fields splits a state value into its fixed-size fields (n int64s); a
// missing value reads as zeros.
func fields(v []byte, n int) ([]int64, error) {
	out := make([]int64, n)
	if v == nil {
		return out, nil
	}
	if len(v) != 8*n {
		return nil, fmt.Errorf("twitch: stored value of %d bytes, want %d", len(v), 8*n)
	}
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(v[8*i:]))
	}
	return out, nil
}

func encodeFields(fields []int64) []byte {
	b := make([]byte, 0, 8*len(fields))
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, uint64(f))
	}
	return b
}

// userSessions tracks the streams each user watches (list state
// "sessions": one "since (8 bytes) + stream id" item per open session) and
// emits, keyed by the event's stream, "time,user,delta,watch
// seconds": delta +1 for a new viewer, −1 for a leave closing a session
// (watch = its length), 0 for a repeated enter or a leave without enter.
func userSessions(dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error) {
	return func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
		e, err := ParseViewEvent(r.Value)
		if err != nil {
			return err
		}
		if e.User != string(r.Key) {
			return malformed("twitch: record key %q is not the user id %q", r.Key, e.User)
		}
		items := st.GetList("sessions", r.Key)
		open := -1
		for i, it := range items {
			if len(it) < 8 {
				return fmt.Errorf("twitch: stored session of %d bytes", len(it))
			}
			if string(it[8:]) == e.Stream {
				open = i
			}
		}
		var delta, watch int64
		switch {
		case e.Type == TwitchEnter && open < 0:
			delta = 1
			items = append(items, append(binary.LittleEndian.AppendUint64(nil, uint64(e.Time)), e.Stream...))
		case e.Type == TwitchLeave && open >= 0:
			delta = -1
			watch = max(0, e.Time-int64(binary.LittleEndian.Uint64(items[open])))
			items = append(items[:open:open], items[open+1:]...)
		}
		st.SetList("sessions", r.Key, items)
		r.Key = []byte(e.Stream)
		r.Value = fmt.Appendf(nil, "%d,%s,%d,%d", e.Time, e.User, delta, watch)
		emit(r)
		return nil
	}, nil
}

// streamViewers counts each stream's viewers (value state "viewers":
// viewers, joins, leaves, watch seconds, events) and emits
// "viewers,joins,leaves,watch,events". It is the operator the Section 5.2
// twitch runs scale, and, as the artifact's viewer-loyalty calculator, it
// alone holds the DummyFieldSize pad: a state of its own ("pad") written
// once, when a stream is first seen, so the pad sizes the state that
// moves without adding a pad's write to every event.
func streamViewers(ctx dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error) {
	size, err := dummyFieldSize(ctx)
	if err != nil {
		return nil, err
	}
	pad := newPad(size, "streamViewers")
	return func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
		in, err := parseTwitchSession(r.Value)
		if err != nil {
			return err
		}
		v := st.Get("viewers", r.Key)
		s, err := fields(v, 5)
		if err != nil {
			return err
		}
		if v == nil && len(pad) > 0 {
			st.Put("pad", r.Key, pad)
		}
		delta, watch := in[0], in[1]
		s[0] += delta
		if delta > 0 {
			s[1]++
		} else if delta < 0 {
			s[2]++
		}
		s[3] += watch
		s[4]++
		st.Put("viewers", r.Key, encodeFields(s))
		r.Value = fmt.Appendf(nil, "%d,%d,%d,%d,%d", s[0], s[1], s[2], s[3], s[4])
		emit(r)
		return nil
	}, nil
}

// parseTwitchSession reads userSessions' "time,user,delta,watch" into
// (delta, watch).
func parseTwitchSession(v []byte) ([2]int64, error) {
	f := bytes.Split(v, []byte(","))
	if len(f) != 4 {
		return [2]int64{}, malformed("twitch: session record %q has %d fields, want 4", v, len(f))
	}
	d, err1 := strconv.ParseInt(string(f[2]), 10, 64)
	w, err2 := strconv.ParseInt(string(f[3]), 10, 64)
	if err1 != nil || err2 != nil || d < -1 || d > 1 || w < 0 {
		return [2]int64{}, malformed("twitch: session record %q: want delta −1..1 and watch ≥ 0", v)
	}
	return [2]int64{d, w}, nil
}

// streamSummary keeps each stream's update count and peak viewers (value
// state "summary") and emits
// "events,viewers,joins,leaves,watch,updates,peak viewers".
func streamSummary(dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error) {
	return func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
		in, err := parseInts(r.Value, 5, "viewer")
		if err != nil {
			return err
		}
		s, err := fields(st.Get("summary", r.Key), 2)
		if err != nil {
			return err
		}
		s[0]++
		s[1] = max(s[1], in[0])
		st.Put("summary", r.Key, encodeFields(s))
		r.Value = fmt.Appendf(nil, "%d,%d,%d,%d,%d,%d,%d", in[4], in[0], in[1], in[2], in[3], s[0], s[1])
		emit(r)
		return nil
	}, nil
}

func buildTwitch(b *dataplane.QueryBuilder, src *dataplane.Stream, sink Sink) {
	b.Describe("Twitch viewing: sessions per user, then viewers per stream (with a pad per stream), then a per-stream summary")
	sessions := src.Process("userSessions", keyed("twitch", []string{"sessions"}, userSessions), true)
	viewers := sessions.Process("streamViewers", keyed("twitch session", []string{"viewers", "pad"}, streamViewers), true)
	sink(viewers.Process("streamSummary", keyed("twitch viewer", []string{"summary"}, streamSummary), true))
}
