package nexmark

import (
	"fmt"
	"strconv"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
)

// Q8 is Nexmark q8: new people who opened an auction in the same tumbling
// event-time window (size Q8WindowSize, job parameter "WindowDuration"
// overrides it): people keyed by id ⋈ auctions keyed by seller in a
// windowed join ("q8-join"), one result per (person, auction) pair like the
// reference query's per-auction output, with the window's start added by
// "q8-result". Records at or behind the join's watermark are counted as
// late by the join and dropped.
const Q8 = "nexmark-q8"

// Q8WindowSize is q8's default window.
const Q8WindowSize = 10 * time.Second

// Q8Result is q8's output value; the record key is the person id.
type Q8Result struct {
	ID          int64  `json:"id"`
	Name        string `json:"name"`
	WindowStart int64  `json:"windowStart"` // unix ms
	Auction     int64  `json:"auction"`
}

func buildQ8(src *dataplane.Stream, sink Sink) {
	persons := src.Process("q8-persons", parser(q8Person), false)
	auctions := src.Process("q8-auctions", parser(q8Auction), false)
	joined := persons.Join("q8-join", auctions, dataplane.JoinSpec{Window: Q8WindowSize, WindowParam: control.ParamWindowDuration, Join: q8Join})
	sink(joined.Process("q8-result", q8ResultFactory, false))
}

func q8Person(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Person == nil {
		return
	}
	r.Key, r.Value = itoa(e.Person.ID), []byte(e.Person.Name)
	emit(r)
}

func q8Auction(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Auction == nil {
		return
	}
	r.Key, r.Value = itoa(e.Auction.Seller), itoa(e.Auction.ID)
	emit(r)
}

func q8Join(key []byte, person, auction dataplane.Record) (dataplane.Record, bool) {
	id, err1 := strconv.ParseInt(string(key), 10, 64)
	a, err2 := strconv.ParseInt(string(auction.Value), 10, 64)
	if err1 != nil || err2 != nil {
		return dataplane.Record{}, false
	}
	// WindowStart is filled in by q8-result, which knows the run's size.
	res := Q8Result{ID: id, Name: string(person.Value), Auction: a}
	return dataplane.Record{Key: key, Value: res.appendBinary(make([]byte, 0, resultCap+len(res.Name)))}, true
}

// q8ResultFactory stamps each joined pair with its window's start (the
// pair's event time is the later of the two, inside the window).
func q8ResultFactory(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
	size := Q8WindowSize
	if v := ctx.Job.Params[control.ParamWindowDuration]; v != "" {
		d, err := dataplane.ParseDurationParam(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("operator %s: parameter %s %q: want milliseconds or a duration such as \"10s\"", ctx.Spec.Name, control.ParamWindowDuration, v)
		}
		size = d
	}
	n := size.Nanoseconds()
	return dataplane.OperatorFunc(func(in []dataplane.Record, emit dataplane.Emit) error {
		for _, r := range in {
			res, err := DecodeQ8Result(r.Value)
			if err != nil {
				return fmt.Errorf("q8-result: key %q: %w", r.Key, err)
			}
			start := r.EventTime / n * n
			if r.EventTime < 0 && r.EventTime%n != 0 {
				start -= n
			}
			res.WindowStart = start / int64(time.Millisecond)
			r.Value = res.appendBinary(make([]byte, 0, resultCap+len(res.Name)))
			emit(r)
		}
		return nil
	}), nil
}
