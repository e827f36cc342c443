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

// AzureListSize is how many of a VM's latest readings cpuReadingStats keeps.
const AzureListSize = 80

// CPUReading is one line of the Azure VM CPU readings trace.
type CPUReading struct {
	Timestamp              int64 // seconds from the trace's start
	VMID                   string
	MinCPU, MaxCPU, AvgCPU float64
}

// CSV renders r in the trace's column layout.
func (r CPUReading) CSV() []byte {
	b := strconv.AppendInt(nil, r.Timestamp, 10)
	b = append(append(b, ','), r.VMID...)
	for _, v := range []float64{r.MinCPU, r.MaxCPU, r.AvgCPU} {
		b = strconv.AppendFloat(append(b, ','), v, 'f', -1, 64)
	}
	return b
}

// ParseCPUReading parses one trace line.
func ParseCPUReading(line []byte) (CPUReading, error) {
	f := bytes.Split(line, []byte(","))
	if len(f) != 5 {
		return CPUReading{}, malformed("azure: %d columns, want 5 (timestamp,vm id,min cpu,max cpu,avg cpu)", len(f))
	}
	var r CPUReading
	var err error
	if r.Timestamp, err = strconv.ParseInt(string(f[0]), 10, 64); err != nil {
		return r, malformed("azure: timestamp %q is not a whole number", f[0])
	}
	if r.VMID = string(f[1]); r.VMID == "" {
		return r, malformed("azure: empty vm id")
	}
	for i, dst := range []*float64{&r.MinCPU, &r.MaxCPU, &r.AvgCPU} {
		v, err := strconv.ParseFloat(string(f[2+i]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return r, malformed("azure: column %d %q is not a number", 3+i, f[2+i])
		}
		*dst = v
	}
	return r, nil
}

func azureKey(line []byte) ([]byte, error) {
	r, err := ParseCPUReading(line)
	return []byte(r.VMID), err
}

// azureOutput renders cpuReadingStats' output for reading r after the
// VM's last readings (oldest first, r last):
// "timestamp,readings,median avg cpu,mean avg cpu,max max cpu".
func azureOutput(r CPUReading, last []CPUReading) string {
	avg := make([]float64, len(last))
	mx := make([]float64, len(last))
	for i, x := range last {
		avg[i], mx[i] = x.AvgCPU, x.MaxCPU
	}
	m := mean(avg)
	return fmt.Sprintf("%d,%d,%s,%s,%s", r.Timestamp, len(last), stat(median(avg)), stat(m), stat(maxOf(mx)))
}

const azureItemSize = 32

func encodeReading(r CPUReading) []byte {
	b := make([]byte, 0, azureItemSize)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Timestamp))
	for _, v := range []float64{r.MinCPU, r.MaxCPU, r.AvgCPU} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func decodeReading(b []byte, vm string) (CPUReading, error) {
	if len(b) != azureItemSize {
		return CPUReading{}, fmt.Errorf("azure: stored reading of %d bytes, want %d", len(b), azureItemSize)
	}
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
	return CPUReading{Timestamp: int64(binary.LittleEndian.Uint64(b)), VMID: vm, MinCPU: f(1), MaxCPU: f(2), AvgCPU: f(3)}, nil
}

// cpuReadingStats keeps each VM's last AzureListSize readings (job
// parameter ListStateSize; list state "readings") and emits the running
// statistics per reading.
func cpuReadingStats(ctx dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error) {
	size, err := control.IntParam(ctx.Job, control.ParamListStateSize, AzureListSize, 1, control.MaxListSize, "readings")
	if err != nil {
		return nil, err
	}
	warm := warmUpFill(ctx)
	return func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
		in, err := ParseCPUReading(r.Value)
		if err != nil {
			return err
		}
		if in.VMID != string(r.Key) {
			return malformed("azure: record key %q is not the vm id %q", r.Key, in.VMID)
		}
		var fill func(int) CPUReading
		if warm {
			fill = func(i int) CPUReading {
				// Earlier readings of the VM around its current load.
				rng := fillerRand(r.Key, i)
				avg := clamp(in.AvgCPU*(0.8+0.4*rng.Float64()), 0.5, 99)
				return CPUReading{Timestamp: in.Timestamp - int64(size-1-i)*AzureReadingInterval, VMID: in.VMID,
					MinCPU: avg * rng.Float64(), MaxCPU: avg + (100-avg)*rng.Float64(), AvgCPU: avg}
			}
		}
		last, err := pushBounded(st, "readings", r.Key, size, in, encodeReading,
			func(b []byte) (CPUReading, error) { return decodeReading(b, in.VMID) }, fill)
		if err != nil {
			return err
		}
		r.Value = []byte(azureOutput(in, last))
		emit(r)
		return nil
	}, nil
}

func buildAzure(b *dataplane.QueryBuilder, src *dataplane.Stream, sink Sink) {
	b.Describe(fmt.Sprintf("Azure VM CPU readings: per VM the median and mean avg cpu and max cpu of the last %d readings", AzureListSize))
	sink(src.Process("cpuReadingStats", keyed("azure", []string{"readings"}, cpuReadingStats), true))
}
