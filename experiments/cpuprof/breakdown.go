package cpuprof

import (
	"fmt"
	"strings"

	"github.com/google/pprof/profile"
)

// Category is one kind of work a worker does. A sample belongs to the first
// category (in the order given to Breakdown) whose every pattern is a
// substring of some function on its stack, so the shares add up to 100 %
// and the order settles the overlaps: a fetch served inside gRPC's server
// is "serving fetches", not "exchange".
type Category struct {
	Name string
	// All: every pattern must name a function on the stack (an empty list
	// matches every sample: the catch-all).
	All []string
	// Any: with All empty, one of these is enough.
	Any []string
}

func (c Category) matches(stack []string) bool {
	has := func(pat string) bool {
		for _, fn := range stack {
			if strings.Contains(fn, pat) {
				return true
			}
		}
		return false
	}
	for _, p := range c.All {
		if !has(p) {
			return false
		}
	}
	if len(c.Any) == 0 {
		return true
	}
	for _, p := range c.Any {
		if has(p) {
			return true
		}
	}
	return false
}

// Other is the name of the catch-all category Breakdown adds.
const Other = "other"

// WorkerCategories is how koala compare splits a worker's CPU time. The
// first three are state moving between tasks (what a reconfiguration
// adds); the operator's time is split into its state reads and the rest.
var WorkerCategories = []Category{
	{Name: "serving fetches (old owner)", Any: []string{"koala/dataplane.(*Worker).takeState"}},
	{Name: "moving state out (bulk)", Any: []string{"koala/dataplane.(*task).pushBuckets", "koala/statesvc.(*Pebble).MoveOutPacked"}},
	{Name: "taking state in", Any: []string{"koala/dataplane.(*keyedState).applyPushed", "koala/dataplane.(*task).pullBucket",
		"koala/dataplane.(*migrator).backgroundChunk", "koala/statesvc.(*Pebble).putMoved"}},
	{Name: "operator: state store", All: []string{"koala/dataplane.(*task).runKeyed", "koala/statesvc."}},
	{Name: "operator: the rest", Any: []string{"koala/dataplane.(*task).runKeyed", "koala/dataplane.(*task).processKeyed"}},
	{Name: "task: batches, fetch waits, sends", Any: []string{"koala/dataplane.(*task)."}},
	{Name: "producers", Any: []string{"koala/dataplane/produce."}},
	{Name: "Pebble flushes and compactions", Any: []string{"github.com/cockroachdb/pebble/v2.(*DB).compact", "github.com/cockroachdb/pebble/v2.(*DB).flush"}},
	{Name: "Kafka client", Any: []string{"github.com/twmb/franz-go", "koala/dataplane/kafkaio"}},
	{Name: "exchange and gRPC", Any: []string{"google.golang.org/grpc", "koala/dataplane/exchange", "golang.org/x/net/http2"}},
	{Name: "garbage collection", Any: []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
}

// PebbleReads marks samples reading through a Pebble iterator (point and
// range reads, by any caller; compactions use their own iterators): a
// column beside the categories, not one of them.
var PebbleReads = Category{Name: "Pebble reads (any caller)", Any: []string{"github.com/cockroachdb/pebble/v2.(*Iterator)."}}

// Split is a profile's CPU time by category.
type Split struct {
	CPUSec float64 `json:"cpu_sec"`
	// Shares: one per category, in order, then Other; percent of CPUSec.
	Shares []float64 `json:"shares"`
	// Across: percent of CPUSec in the cross-cutting category
	// (PebbleReads for koala compare).
	Across float64 `json:"across"`
}

// Breakdown splits p's CPU time over cats (plus Other, last) and measures
// the share of across beside them.
func Breakdown(p *profile.Profile, cats []Category, across Category) (Split, error) {
	idx, err := CPUIndex(p)
	if err != nil {
		return Split{}, err
	}
	unit := p.SampleType[idx].Unit
	ns := make([]float64, len(cats)+1)
	var total, acr float64
	var stack []string
	for _, s := range p.Sample {
		if idx >= len(s.Value) {
			return Split{}, fmt.Errorf("sample with %d values, want at least %d", len(s.Value), idx+1)
		}
		v := Nanos(s.Value[idx], unit)
		if v == 0 {
			continue
		}
		total += v
		stack = stack[:0]
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function != nil {
					stack = append(stack, line.Function.Name)
				}
			}
		}
		c := len(cats)
		for i, cat := range cats {
			if cat.matches(stack) {
				c = i
				break
			}
		}
		ns[c] += v
		if (len(across.All) > 0 || len(across.Any) > 0) && across.matches(stack) {
			acr += v
		}
	}
	out := Split{CPUSec: total / 1e9, Shares: make([]float64, len(ns))}
	if total > 0 {
		for i, v := range ns {
			out.Shares[i] = 100 * v / total
		}
		out.Across = 100 * acr / total
	}
	return out, nil
}

// Names lists the categories' names, then Other: the header of a Split's
// shares.
func Names(cats []Category) []string {
	out := make([]string, 0, len(cats)+1)
	for _, c := range cats {
		out = append(out, c.Name)
	}
	return append(out, Other)
}
