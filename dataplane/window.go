package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// Windows
//
// A window operator is a keyed StatefulOperator that assigns each record to
// the event-time windows containing its event time, folds it into each
// window's accumulator with an incremental Aggregator, and emits one result
// per (key, window) when the watermark passes the window's end.
//
// State. Every pending window of a key lives in that key's value of the
// list state "windows": one item per window, the window start (8 bytes,
// big-endian) followed by the accumulator, ordered by start. State keys are
// operator | bucket(key) | state | key, so the window start cannot be part
// of the state key without moving the value into another bucket than the
// key's records; keeping a key's windows in its own value means they move
// with the key under every migration protocol, unchanged.
//
// Pending windows. The operator indexes window ends → keys in memory to find
// due windows cheaply, but the index is derived from state: the runtime
// builds it from the store at the task's first watermark, and a handoff
// moves the timers of the keys it moves with their lookup entries, so a new
// owner knows when a key still on its old owner is due without its value
// (timer_sync.go). Nothing is lost by a migration. A key still remote when
// one of its windows is due is fetched at that watermark, with the other due
// keys and no other, and its window fires there, with all its state, as it
// would have on the old owner.
//
// Lateness. A record whose event time is ≤ the operator's current watermark
// when it arrives is late: it is counted (Counters()["late_records"]),
// logged (rate-limited) and dropped, or handed to WindowSpec.OnLate.
// Limitation: a task created by a scale-out has no watermark until every
// upstream task sent one (about WatermarkInterval), so a record late by
// more than the out-of-orderness bound that reaches it in that interval is
// not recognised as late and may produce a second, partial result for a
// window that already fired on the key's previous owner.

// Aggregator folds records into a window accumulator. Add may modify acc
// in place and return it. Result builds the record emitted for a fired
// window; EventTime 0 becomes windowEnd−1, and Offset is always -1 (a
// derived record).
type Aggregator interface {
	Zero() []byte
	Add(acc []byte, r Record) []byte
	Result(key []byte, windowEnd int64, acc []byte) Record
}

// WindowSpec shapes event-time windows. Slide 0 (or Slide == Size) makes
// tumbling windows; 0 < Slide < Size makes sliding windows, each record
// falling into ceil(Size/Slide) windows. Windows are aligned to the epoch:
// [k·Slide, k·Slide+Size).
type WindowSpec struct {
	Size  time.Duration
	Slide time.Duration
	// OnLate, when set, receives each late record (with emit, so it can be
	// sent downstream as a side result) instead of it being dropped. Late
	// records are counted either way.
	OnLate func(r Record, emit Emit)
	// SizeParam, when set, names a job parameter that overrides Size at run
	// time (e.g. the artifact's "WindowDuration"): a number of
	// milliseconds or a Go duration such as "10s". Slide is scaled with it.
	SizeParam string
}

// Tumbling returns a tumbling window spec.
func Tumbling(size time.Duration) WindowSpec { return WindowSpec{Size: size} }

// Sliding returns a sliding window spec.
func Sliding(size, slide time.Duration) WindowSpec { return WindowSpec{Size: size, Slide: slide} }

func (s WindowSpec) check() error {
	if s.Size <= 0 {
		return fmt.Errorf("window size %v: must be > 0", s.Size)
	}
	if s.Slide < 0 || s.Slide > s.Size {
		return fmt.Errorf("window slide %v: must be between 0 and the size %v", s.Slide, s.Size)
	}
	return nil
}

func (s WindowSpec) slide() int64 {
	if s.Slide == 0 {
		return s.Size.Nanoseconds()
	}
	return s.Slide.Nanoseconds()
}

// WindowStarts returns the starts of the windows containing ts, latest first.
func (s WindowSpec) WindowStarts(ts int64) []int64 {
	size, slide := s.Size.Nanoseconds(), s.slide()
	last := floorDiv(ts, slide) * slide
	var out []int64
	for st := last; st > ts-size; st -= slide {
		out = append(out, st)
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// WindowState is the list state holding a key's pending windows.
const WindowState = "windows"

// NewWindowFactory returns the factory of a keyed window aggregate.
func NewWindowFactory(spec WindowSpec, agg func() Aggregator) (OperatorFactory, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if agg == nil {
		return nil, errors.New("window: aggregator is required")
	}
	return func(ctx OperatorContext) (Operator, error) {
		log := ctx.Logger
		if log == nil {
			log = slog.Default()
		}
		spec := spec
		if v := ctx.Job.Params[spec.SizeParam]; spec.SizeParam != "" && v != "" {
			d, err := ParseDurationParam(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("window %s: parameter %s %q: want milliseconds or a duration such as \"10s\"", ctx.Spec.Name, spec.SizeParam, v)
			}
			if spec.Slide > 0 {
				spec.Slide = time.Duration(float64(spec.Slide) * float64(d) / float64(spec.Size))
			}
			spec.Size = d
			if err := spec.check(); err != nil {
				return nil, fmt.Errorf("window %s: %w", ctx.Spec.Name, err)
			}
		}
		return &windowOperator{spec: spec, agg: agg(), size: spec.Size.Nanoseconds(), wm: MinWatermark, log: log}, nil
	}, nil
}

// ParseDurationParam reads a duration parameter: a number of milliseconds
// or a Go duration ("10s", "500ms").
func ParseDurationParam(v string) (time.Duration, error) {
	if ms, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	return time.ParseDuration(v)
}

type windowOperator struct {
	LateBound
	spec  WindowSpec
	agg   Aggregator
	size  int64
	wm    int64
	index TimerIndex
	due   [][]byte
	log   *slog.Logger

	late      atomic.Uint64
	fired     atomic.Uint64
	lateTold  time.Time
	lateSince uint64
}

type pendingWindow struct {
	start int64
	acc   []byte
}

func (w *windowOperator) StateNames() []string { return []string{WindowState} }

func (w *windowOperator) ProcessBatch([]Record, Emit) error {
	return errors.New("window operator called without keyed state (its input must be keyed)")
}

func decodeWindows(items [][]byte) ([]pendingWindow, error) {
	out := make([]pendingWindow, 0, len(items))
	for _, it := range items {
		if len(it) < 8 {
			return out, fmt.Errorf("window state item of %d bytes", len(it))
		}
		out = append(out, pendingWindow{start: int64(binary.BigEndian.Uint64(it)), acc: slices.Clone(it[8:])})
	}
	return out, nil
}

func encodeWindows(ws []pendingWindow) [][]byte {
	items := make([][]byte, len(ws))
	for i, pw := range ws {
		it := make([]byte, 8, 8+len(pw.acc))
		binary.BigEndian.PutUint64(it, uint64(pw.start))
		items[i] = append(it, pw.acc...)
	}
	return items
}

func (w *windowOperator) ProcessKeyed(in []Record, st *State, emit Emit) error {
	type keyWindows struct {
		key []byte
		ws  []pendingWindow
	}
	cache := map[string]*keyWindows{}
	var order []*keyWindows
	for i := range in {
		r := in[i]
		if w.IsLate(r.EventTime, w.wm) {
			w.onLate(r, emit)
			continue
		}
		kw := cache[string(r.Key)]
		if kw == nil {
			ws, err := decodeWindows(st.GetList(WindowState, r.Key))
			if err != nil {
				return fmt.Errorf("key %q: %w", r.Key, err)
			}
			kw = &keyWindows{key: r.Key, ws: ws}
			cache[string(r.Key)] = kw
			order = append(order, kw)
		}
		for _, start := range w.spec.WindowStarts(r.EventTime) {
			j, found := slices.BinarySearchFunc(kw.ws, start, func(pw pendingWindow, s int64) int {
				switch {
				case pw.start < s:
					return -1
				case pw.start > s:
					return 1
				}
				return 0
			})
			if !found {
				kw.ws = slices.Insert(kw.ws, j, pendingWindow{start: start, acc: w.agg.Zero()})
			}
			kw.ws[j].acc = w.agg.Add(kw.ws[j].acc, r)
		}
	}
	for _, kw := range order {
		st.SetList(WindowState, kw.key, encodeWindows(kw.ws))
		for _, pw := range kw.ws {
			w.index.Add(pw.start+w.size-1, kw.key)
		}
	}
	return nil
}

func (w *windowOperator) onLate(r Record, emit Emit) {
	n := w.late.Add(1)
	if w.spec.OnLate != nil {
		w.spec.OnLate(r, emit)
		return
	}
	if now := time.Now(); now.Sub(w.lateTold) >= 10*time.Second {
		w.log.Warn("late records dropped by window operator", "count", n-w.lateSince, "total", n,
			"event_time", r.EventTime, "watermark", w.wm)
		w.lateTold, w.lateSince = now, n
	}
}

func (w *windowOperator) DueKeys(wm int64) [][]byte {
	w.due = w.index.PopDue(wm)
	return w.due
}

func (w *windowOperator) OnWatermark(wm int64, st *State, emit Emit) error {
	if wm > w.wm {
		w.wm = wm
	}
	if st == nil {
		return nil
	}
	for _, key := range w.due {
		ws, err := decodeWindows(st.GetList(WindowState, key))
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		if len(ws) == 0 {
			continue
		}
		keep := ws[:0]
		for _, pw := range ws {
			if maxTs := pw.start + w.size - 1; maxTs <= wm {
				end := pw.start + w.size
				out := w.agg.Result(key, end, pw.acc)
				if out.EventTime == 0 {
					out.EventTime = maxTs
				}
				out.Offset, out.Partition = -1, -1
				emit(out)
				w.fired.Add(1)
			} else {
				keep = append(keep, pw)
			}
		}
		if len(keep) != len(ws) {
			st.SetList(WindowState, key, encodeWindows(keep))
		}
	}
	w.due = nil
	return nil
}

func (w *windowOperator) indexedStates() []string { return []string{WindowState} }
func (w *windowOperator) resetIndex()             { w.index.Reset() }
func (w *windowOperator) Timers() *TimerIndex     { return &w.index }
func (w *windowOperator) indexValue(_ string, key, value []byte) {
	items, _ := DecodeList(value)
	for _, it := range items {
		if len(it) >= 8 {
			w.index.Add(int64(binary.BigEndian.Uint64(it))+w.size-1, key)
		}
	}
}

func (w *windowOperator) Counters() map[string]uint64 {
	return map[string]uint64{"late_records": w.late.Load(), "windows_fired": w.fired.Load()}
}

// WindowResultKey is the key CountAggregator gives a window's result:
// "<key>@<window end in unix milliseconds>".
func WindowResultKey(key []byte, windowEnd int64) []byte {
	out := append([]byte(nil), key...)
	out = append(out, '@')
	return strconv.AppendInt(out, windowEnd/int64(time.Millisecond), 10)
}

// CountAggregator counts records per window; the result's key is
// WindowResultKey(key, end) and its value the count as 8 bytes
// little-endian (what the collect-sink keeps).
type CountAggregator struct{}

func (CountAggregator) Zero() []byte { return make([]byte, 8) }

func (CountAggregator) Add(acc []byte, _ Record) []byte {
	binary.LittleEndian.PutUint64(acc, binary.LittleEndian.Uint64(acc)+1)
	return acc
}

func (CountAggregator) Result(key []byte, end int64, acc []byte) Record {
	return Record{Key: WindowResultKey(key, end), Value: slices.Clone(acc)}
}

// SumAggregator sums a little-endian int64 read from each record's value by
// Field (default: the first 8 bytes of the value); the result is like
// CountAggregator's with the sum as value.
type SumAggregator struct {
	Field func(Record) int64
}

func (SumAggregator) Zero() []byte { return make([]byte, 8) }

func (a SumAggregator) Add(acc []byte, r Record) []byte {
	var v int64
	if a.Field != nil {
		v = a.Field(r)
	} else if len(r.Value) >= 8 {
		v = int64(binary.LittleEndian.Uint64(r.Value))
	}
	binary.LittleEndian.PutUint64(acc, uint64(int64(binary.LittleEndian.Uint64(acc))+v))
	return acc
}

func (SumAggregator) Result(key []byte, end int64, acc []byte) Record {
	return Record{Key: WindowResultKey(key, end), Value: slices.Clone(acc)}
}
