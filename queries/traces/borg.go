package traces

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"koala/dataplane"
	"koala/dataplane/control"
)

// BorgListSize is how many of a (job, event type)'s latest events
// jobEventStats keeps.
const BorgListSize = 10

// Borg task event types (column 6 of task_events).
const (
	BorgSubmit = iota
	BorgSchedule
	BorgEvict
	BorgFail
	BorgFinish
	BorgKill
	BorgLost
	BorgUpdatePending
	BorgUpdateRunning
	borgEventTypes
)

// TaskEvent is one line of the Google cluster trace's task events.
type TaskEvent struct {
	Time       int64 // µs from the trace's start
	Missing    string
	JobID      int64
	TaskIndex  int64
	MachineID  int64 // 0 when empty
	EventType  int
	User       string
	SchedClass int
	Priority   int
	CPU        float64 // normalised requests; 0 when empty
	RAM        float64
	Disk       float64
	Constraint int
}

// Key is the record key: "<job id>_<event type>".
func (e TaskEvent) Key() string { return fmt.Sprintf("%d_%d", e.JobID, e.EventType) }

// CSV renders e in the trace's column layout.
func (e TaskEvent) CSV() []byte {
	b := strconv.AppendInt(nil, e.Time, 10)
	b = append(append(b, ','), e.Missing...)
	for _, v := range []int64{e.JobID, e.TaskIndex} {
		b = strconv.AppendInt(append(b, ','), v, 10)
	}
	b = append(b, ',')
	if e.MachineID != 0 {
		b = strconv.AppendInt(b, e.MachineID, 10)
	}
	b = strconv.AppendInt(append(b, ','), int64(e.EventType), 10)
	b = append(append(b, ','), e.User...)
	b = strconv.AppendInt(append(b, ','), int64(e.SchedClass), 10)
	b = strconv.AppendInt(append(b, ','), int64(e.Priority), 10)
	for _, v := range []float64{e.CPU, e.RAM, e.Disk} {
		b = strconv.AppendFloat(append(b, ','), v, 'f', -1, 64)
	}
	return strconv.AppendInt(append(b, ','), int64(e.Constraint), 10)
}

// ParseTaskEvent parses one trace line.
func ParseTaskEvent(line []byte) (TaskEvent, error) {
	f := bytes.Split(line, []byte(","))
	if len(f) != 13 {
		return TaskEvent{}, malformed("borg: %d columns, want 13", len(f))
	}
	var e TaskEvent
	ints := []struct {
		col  int
		name string
		dst  *int64
		opt  bool
	}{{0, "time", &e.Time, false}, {2, "job id", &e.JobID, false}, {3, "task index", &e.TaskIndex, false}, {4, "machine id", &e.MachineID, true}}
	for _, c := range ints {
		if c.opt && len(f[c.col]) == 0 {
			continue
		}
		v, err := strconv.ParseInt(string(f[c.col]), 10, 64)
		if err != nil {
			return e, malformed("borg: %s %q is not a whole number", c.name, f[c.col])
		}
		*c.dst = v
	}
	t, err := strconv.Atoi(string(f[5]))
	if err != nil || t < 0 || t >= borgEventTypes {
		return e, malformed("borg: event type %q, want 0–%d", f[5], borgEventTypes-1)
	}
	e.EventType = t
	e.Missing, e.User = string(f[1]), string(f[6])
	for i, dst := range []*int{&e.SchedClass, &e.Priority} {
		if len(f[7+i]) == 0 {
			continue
		}
		if *dst, err = strconv.Atoi(string(f[7+i])); err != nil {
			return e, malformed("borg: column %d %q is not a whole number", 8+i, f[7+i])
		}
	}
	for i, dst := range []*float64{&e.CPU, &e.RAM, &e.Disk} {
		if len(f[9+i]) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(f[9+i]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return e, malformed("borg: column %d %q is not a number", 10+i, f[9+i])
		}
		*dst = v
	}
	if len(f[12]) > 0 {
		if e.Constraint, err = strconv.Atoi(string(f[12])); err != nil {
			return e, malformed("borg: constraint %q is not a whole number", f[12])
		}
	}
	return e, nil
}

func borgKey(line []byte) ([]byte, error) {
	e, err := ParseTaskEvent(line)
	return []byte(e.Key()), err
}

// borgOutput renders jobEventStats' output for event e after the key's
// last events (oldest first, e last): "time,events,mean cpu,max cpu,mean
// ram,max ram,mean disk,max disk".
func borgOutput(e TaskEvent, last []TaskEvent) string {
	cpu, ram, disk := make([]float64, len(last)), make([]float64, len(last)), make([]float64, len(last))
	for i, x := range last {
		cpu[i], ram[i], disk[i] = x.CPU, x.RAM, x.Disk
	}
	return fmt.Sprintf("%d,%d,%s,%s,%s,%s,%s,%s", e.Time, len(last),
		stat(mean(cpu)), stat(maxOf(cpu)), stat(mean(ram)), stat(maxOf(ram)), stat(mean(disk)), stat(maxOf(disk)))
}

const borgItemSize = 32

func encodeTaskEvent(e TaskEvent) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, borgItemSize), uint64(e.Time))
	for _, v := range []float64{e.CPU, e.RAM, e.Disk} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func decodeTaskEvent(b []byte) (TaskEvent, error) {
	if len(b) != borgItemSize {
		return TaskEvent{}, fmt.Errorf("borg: stored event of %d bytes, want %d", len(b), borgItemSize)
	}
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
	return TaskEvent{Time: int64(binary.LittleEndian.Uint64(b)), CPU: f(1), RAM: f(2), Disk: f(3)}, nil
}

// jobEventStats keeps the last BorgListSize events of each (job, event
// type) (job parameter ListStateSize; list state "events") and emits their
// request statistics.
func jobEventStats(ctx dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error) {
	size, err := control.IntParam(ctx.Job, control.ParamListStateSize, BorgListSize, 1, control.MaxListSize, "events")
	if err != nil {
		return nil, err
	}
	warm := warmUpFill(ctx)
	return func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
		in, err := ParseTaskEvent(r.Value)
		if err != nil {
			return err
		}
		if k := in.Key(); k != string(r.Key) {
			return malformed("borg: record key %q is not the job and event type %q", r.Key, k)
		}
		var fill func(int) TaskEvent
		if warm {
			fill = func(i int) TaskEvent {
				// Earlier events of the job, its requests varying ±20 %.
				rng := fillerRand(r.Key, i)
				return TaskEvent{Time: in.Time - int64(size-1-i)*1000, CPU: in.CPU * (0.8 + 0.4*rng.Float64()),
					RAM: in.RAM * (0.8 + 0.4*rng.Float64()), Disk: in.Disk * (0.8 + 0.4*rng.Float64())}
			}
		}
		last, err := pushBounded(st, "events", r.Key, size, in, encodeTaskEvent, decodeTaskEvent, fill)
		if err != nil {
			return err
		}
		r.Value = []byte(borgOutput(in, last))
		emit(r)
		return nil
	}, nil
}

func buildBorg(b *dataplane.QueryBuilder, src *dataplane.Stream, sink Sink) {
	b.Describe(fmt.Sprintf("Borg task events: per job and event type the mean and max cpu/ram/disk requests of the last %d events", BorgListSize))
	sink(src.Process("jobEventStats", keyed("borg", []string{"events"}, jobEventStats), true))
}
