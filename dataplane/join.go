package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"koala/dataplane/wire"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// Two-input operators
//
// An operator with two inputs (OperatorSpec.Inputs names two operators)
// learns which input a record came from through InputOf: the runtime tags
// each record as it arrives from an upstream task, before anything else,
// so the tag survives when an old owner forwards in-flight records to a key's
// new owner during a reconfiguration (the tag travels in Record.Partition,
// which the exchange carries). A two-input operator therefore does not see
// the Kafka partition of its input records.

// inputTagBase is the Partition value of records from input 0; input i is
// inputTagBase − i.
const inputTagBase = -1000

// InputOf returns which input (0 = first of OperatorSpec.Inputs) a record
// reached a two-input operator from, or -1 for an untagged record.
func InputOf(r Record) int {
	if r.Partition <= inputTagBase {
		return int(inputTagBase - r.Partition)
	}
	return -1
}

// tagInputs marks the records of a data frame with the input they came
// from, for operators with more than one input. Records an old owner of
// the same operator forwards keep the tag they got on first arrival.
func (t *task) tagInputs(f *wire.Frame) []Record {
	if len(t.spec.Inputs) < 2 {
		return f.Records
	}
	side := inputIndex(t.spec.Inputs, f.FromTask)
	if side < 0 {
		return f.Records
	}
	tag := int32(inputTagBase - side)
	for i := range f.Records {
		f.Records[i].Partition = tag
	}
	return f.Records
}

// inputIndex finds the operator of task id ("<operator>-<index>") among inputs.
func inputIndex(inputs []string, taskID string) int {
	i := strings.LastIndexByte(taskID, '-')
	if i < 0 {
		return -1
	}
	op := taskID[:i]
	for j, in := range inputs {
		if in == op {
			return j
		}
	}
	return -1
}

// Join states: the records of each input kept per join key (list state).
const (
	JoinLeftState  = "left"
	JoinRightState = "right"
)

// JoinSpec configures a keyed two-input join. Both inputs must be keyed by
// the join key (the upstream operators set Record.Key to it).
type JoinSpec struct {
	// Window > 0 makes a windowed join: a record joins the records of the
	// other input in the same tumbling event-time window [k·Window,
	// (k+1)·Window), and a window's records are evicted once the watermark
	// passes its end. Window 0 joins with every record ever seen (state
	// grows without bound).
	Window time.Duration
	// Join builds the output of a matching pair; ok false emits nothing.
	// The output's EventTime 0 becomes the later of the two; its Offset is
	// always -1 (a derived record).
	Join func(key []byte, left, right Record) (out Record, ok bool)
	// OnLate receives late records of a windowed join (event time ≤ the
	// watermark on arrival) instead of them being dropped; they are counted
	// either way.
	OnLate func(r Record, emit Emit)
	// WindowParam, when set, names a job parameter that overrides Window
	// at run time (e.g. the artifact's "WindowDuration"), read like
	// WindowSpec.SizeParam; it only applies to a windowed join.
	WindowParam string
}

// NewJoinFactory returns the factory of a keyed two-input join.
func NewJoinFactory(spec JoinSpec) (OperatorFactory, error) {
	if spec.Join == nil {
		return nil, errors.New("join: the Join function is required")
	}
	if spec.Window < 0 {
		return nil, fmt.Errorf("join window %v: must be ≥ 0", spec.Window)
	}
	return func(ctx OperatorContext) (Operator, error) {
		if n := len(ctx.Spec.Inputs); n != 2 {
			return nil, fmt.Errorf("join %q has %d inputs, want 2", ctx.Spec.Name, n)
		}
		log := ctx.Logger
		if log == nil {
			log = slog.Default()
		}
		spec := spec
		if v := ctx.Job.Params[spec.WindowParam]; spec.Window > 0 && spec.WindowParam != "" && v != "" {
			d, err := ParseDurationParam(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("join %s: parameter %s %q: want milliseconds or a duration such as \"10s\"", ctx.Spec.Name, spec.WindowParam, v)
			}
			spec.Window = d
		}
		j := &joinOperator{spec: spec, wm: MinWatermark, log: log}
		if spec.Window > 0 {
			return &windowedJoin{joinOperator: j, size: spec.Window.Nanoseconds()}, nil
		}
		return j, nil
	}, nil
}

type joinOperator struct {
	LateBound
	spec JoinSpec
	wm   int64
	log  *slog.Logger

	matched  atomic.Uint64
	late     atomic.Uint64
	untagged atomic.Uint64
	lateTold time.Time
}

func (j *joinOperator) StateNames() []string { return []string{JoinLeftState, JoinRightState} }

func (j *joinOperator) ProcessBatch([]Record, Emit) error {
	return errors.New("join operator called without keyed state (its inputs must be keyed)")
}

// joinItem encodes a kept record: event time (8 bytes big-endian), value.
func joinItem(r Record) []byte {
	it := make([]byte, 8, 8+len(r.Value))
	binary.BigEndian.PutUint64(it, uint64(r.EventTime))
	return append(it, r.Value...)
}

func joinRecord(key, it []byte) Record {
	return Record{Key: key, EventTime: int64(binary.BigEndian.Uint64(it)), Value: it[8:], Offset: -1, Partition: -1}
}

func (j *joinOperator) ProcessKeyed(in []Record, st *State, emit Emit) error {
	return j.process(in, st, emit, 0)
}

// process joins each record with the other input's kept records (only those
// of the same window when size > 0) and keeps it.
func (j *joinOperator) process(in []Record, st *State, emit Emit, size int64) error {
	for _, r := range in {
		side := InputOf(r)
		if side != 0 && side != 1 {
			j.untagged.Add(1)
			return fmt.Errorf("join: record of key %q came from no known input", r.Key)
		}
		if size > 0 && j.IsLate(r.EventTime, j.wm) {
			j.onLate(r, emit)
			continue
		}
		own, other := JoinLeftState, JoinRightState
		if side == 1 {
			own, other = other, own
		}
		var win int64
		if size > 0 {
			win = floorDiv(r.EventTime, size)
		}
		for _, it := range st.GetList(other, r.Key) {
			if len(it) < 8 {
				continue
			}
			o := joinRecord(r.Key, it)
			if size > 0 && floorDiv(o.EventTime, size) != win {
				continue
			}
			left, right := r, o
			if side == 1 {
				left, right = o, r
			}
			out, ok := j.spec.Join(r.Key, left, right)
			if !ok {
				continue
			}
			if out.EventTime == 0 {
				out.EventTime = max(left.EventTime, right.EventTime)
			}
			out.Offset, out.Partition = -1, -1
			emit(out)
			j.matched.Add(1)
		}
		st.AppendList(own, r.Key, joinItem(r))
	}
	return nil
}

func (j *joinOperator) onLate(r Record, emit Emit) {
	n := j.late.Add(1)
	if j.spec.OnLate != nil {
		j.spec.OnLate(r, emit)
		return
	}
	if now := time.Now(); now.Sub(j.lateTold) >= 10*time.Second {
		j.log.Warn("late records dropped by windowed join", "total", n, "event_time", r.EventTime, "watermark", j.wm)
		j.lateTold = now
	}
}

func (j *joinOperator) Counters() map[string]uint64 {
	return map[string]uint64{"joined": j.matched.Load(), "late_records": j.late.Load()}
}

// windowedJoin evicts a window's records when the watermark passes its end.
type windowedJoin struct {
	*joinOperator
	size  int64
	index TimerIndex
	due   [][]byte
}

func (w *windowedJoin) ProcessKeyed(in []Record, st *State, emit Emit) error {
	if err := w.process(in, st, emit, w.size); err != nil {
		return err
	}
	for _, r := range in {
		if side := InputOf(r); (side == 0 || side == 1) && r.EventTime > w.wm {
			w.index.Add(w.windowMaxTs(r.EventTime), r.Key)
		}
	}
	return nil
}

func (w *windowedJoin) windowMaxTs(ts int64) int64 { return floorDiv(ts, w.size)*w.size + w.size - 1 }

func (w *windowedJoin) DueKeys(wm int64) [][]byte {
	w.due = w.index.PopDue(wm)
	return w.due
}

func (w *windowedJoin) OnWatermark(wm int64, st *State, _ Emit) error {
	if wm > w.wm {
		w.wm = wm
	}
	if st == nil {
		return nil
	}
	for _, key := range w.due {
		for _, name := range []string{JoinLeftState, JoinRightState} {
			items := st.GetList(name, key)
			keep := items[:0:0]
			for _, it := range items {
				if len(it) >= 8 && w.windowMaxTs(int64(binary.BigEndian.Uint64(it))) > wm {
					keep = append(keep, it)
				}
			}
			if len(keep) != len(items) {
				st.SetList(name, key, keep)
			}
		}
	}
	w.due = nil
	return nil
}

func (w *windowedJoin) indexedStates() []string { return []string{JoinLeftState, JoinRightState} }
func (w *windowedJoin) resetIndex()             { w.index.Reset() }
func (w *windowedJoin) Timers() *TimerIndex     { return &w.index }
func (w *windowedJoin) indexValue(_ string, key, value []byte) {
	items, _ := DecodeList(value)
	for _, it := range items {
		if len(it) >= 8 {
			w.index.Add(w.windowMaxTs(int64(binary.BigEndian.Uint64(it))), key)
		}
	}
}
