package dataplane

import (
	"bytes"
	"slices"
)

// TimerIndex maps event-time timers to the keys that have a timer then, for
// operators that fire per key when the watermark passes a time (windows,
// windowed joins, auction closing). It lives in memory: operators rebuild it
// from their keyed state after a restore or a migration.
type TimerIndex struct {
	at    map[int64]map[string]struct{}
	times []int64 // ascending, distinct
}

// Add registers a timer for key at t; a key with several timers fires once
// per PopDue that covers any of them.
func (x *TimerIndex) Add(t int64, key []byte) {
	if x.at == nil {
		x.at = map[int64]map[string]struct{}{}
	}
	keys := x.at[t]
	if keys == nil {
		keys = map[string]struct{}{}
		x.at[t] = keys
		// Timers mostly arrive in time order, so appending is the common case.
		if n := len(x.times); n == 0 || x.times[n-1] < t {
			x.times = append(x.times, t)
		} else {
			i, _ := slices.BinarySearch(x.times, t)
			x.times = slices.Insert(x.times, i, t)
		}
	}
	keys[string(key)] = struct{}{}
}

// PopDue removes every timer ≤ wm and returns their distinct keys, sorted so
// that what an operator emits for one watermark does not depend on map order.
func (x *TimerIndex) PopDue(wm int64) [][]byte {
	seen := map[string]struct{}{}
	n := 0
	for _, t := range x.times {
		if t > wm {
			break
		}
		n++
		for k := range x.at[t] {
			seen[k] = struct{}{}
		}
		delete(x.at, t)
	}
	x.times = x.times[n:]
	out := make([][]byte, 0, len(seen))
	for k := range seen {
		out = append(out, []byte(k))
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

// Reset drops every timer.
func (x *TimerIndex) Reset() { x.at, x.times = nil, nil }

// Len is the number of distinct timer times.
func (x *TimerIndex) Len() int { return len(x.times) }

// timer is one entry of a TimerIndex.
type timer struct {
	at  int64
	key string
}

// take removes the timers of every key match accepts and returns them in
// time order. An old owner hands them to the new owner of the keys with
// the keys' lookup entries, so the new owner knows when each key is due
// without reading its value.
func (x *TimerIndex) take(match func(key string) bool) []timer {
	var out []timer
	keep := x.times[:0]
	for _, t := range x.times {
		keys := x.at[t]
		for k := range keys {
			if match(k) {
				out = append(out, timer{at: t, key: k})
				delete(keys, k)
			}
		}
		if len(keys) == 0 {
			delete(x.at, t)
			continue
		}
		keep = append(keep, t)
	}
	x.times = keep
	return out
}
