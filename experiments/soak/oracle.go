package soak

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane"
	"koala/queries/nexmark"
)

// The oracle: each job's input topic is read back from Kafka, the output
// each query must produce is recomputed from it, and the job's output
// topic (its transactional Kafka sink, read_committed, one partition so
// its order is the sink's write order) is compared with it per key.

// Check is the oracle's verdict on one job.
type Check struct {
	Segment    int
	Protocol   Protocol
	Query      string
	WorkflowID string
	Inputs     int64 // records in the input topic
	Expected   int64 // outputs the oracle expects
	Outputs    int64 // outputs read back
	Lost       int64
	Duplicated int64
	// Reordered counts outputs that came after a later output of their
	// key; -1 when the query's output has no per-key order (NA says why).
	Reordered int64
	NA        string
	// Late is the records the job's operators dropped as late (their
	// late_records counters, from the task metrics); -1 when unknown. A
	// window that lost records to lateness shows here as well as in Lost.
	Late     int64
	Examples []string // a few offending keys, for the report
	Err      string   // the job or the oracle failed
}

// Exact reports whether the check found nothing wrong.
func (c Check) Exact() bool {
	return c.Err == "" && c.Lost == 0 && c.Duplicated == 0 && c.Reordered <= 0
}

// readTopic reads every record of topic up to its end offsets as of now
// (read_committed: aborted transactions are skipped) in partition order.
func readTopic(ctx context.Context, brokers []string, topic string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	var errs []error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("end offset of %s/%d: %w", topic, o.Partition, o.Err))
		}
		ends[o.Partition] = o.Offset
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	for !done() {
		// A fetch that makes no progress for this long means the rest is
		// not readable (an open transaction the sink never ended).
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		if fs.IsClientClosed() || (fctx.Err() != nil && fs.NumRecords() == 0) {
			return out, fmt.Errorf("read %s: stuck at %v of %v", topic, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	// Partition order, then offset: a key's records keep their order.
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out, nil
}

// checkCounter: for every key, the counter's outputs must be 1, 2, …, n
// in that order, n being the key's records in the input.
func checkCounter(c *Check, in, out []*kgo.Record) {
	n := map[string]uint64{}
	for _, r := range in {
		n[string(r.Key)]++
	}
	seqs := map[string][]uint64{}
	for _, r := range out {
		if len(r.Value) < 8 {
			c.Err = fmt.Sprintf("output of key %q has %d bytes, want an 8-byte count", r.Key, len(r.Value))
			return
		}
		k := string(r.Key)
		seqs[k] = append(seqs[k], binary.LittleEndian.Uint64(r.Value))
	}
	c.Expected = int64(len(in))
	for k, want := range n {
		checkSequence(c, k, seqs[k], want)
	}
	for k, s := range seqs {
		if _, ok := n[k]; !ok {
			c.Duplicated += int64(len(s))
			c.example("key %s: %d outputs, not in the input", k, len(s))
		}
	}
}

// checkSequence compares a key's outputs with 1..want.
func checkSequence(c *Check, key string, got []uint64, want uint64) {
	seen := make(map[uint64]bool, len(got))
	var hi uint64
	var lost, dup, reord int64
	for _, v := range got {
		switch {
		case v == 0 || v > want:
			dup++ // a count the input cannot explain
		case seen[v]:
			dup++
		default:
			seen[v] = true
			if v < hi {
				reord++
			}
		}
		hi = max(hi, v)
	}
	lost = int64(want) - int64(len(seen))
	c.Lost += lost
	c.Duplicated += dup
	c.Reordered += reord
	if lost+dup+reord > 0 {
		c.example("key %s: %d inputs, %d outputs (lost %d, dup %d, reordered %d)", key, want, len(got), lost, dup, reord)
	}
}

// checkWindow: one output per key and 1 s window with the window's count;
// a key's windows come out in order of their ends.
func checkWindow(c *Check, in, out []*kgo.Record) {
	want := map[string]uint64{}
	for _, r := range in {
		ns := r.Timestamp.UnixNano()
		end := (ns/int64(time.Second) + 1) * int64(time.Second)
		want[string(dataplane.WindowResultKey(r.Key, end))]++
	}
	c.Expected = int64(len(want))
	got := map[string][]uint64{}
	lastEnd := map[string]int64{}
	for _, r := range out {
		k := string(r.Key)
		if len(r.Value) < 8 {
			c.Err = fmt.Sprintf("output of window %q has %d bytes, want an 8-byte count", k, len(r.Value))
			return
		}
		got[k] = append(got[k], binary.LittleEndian.Uint64(r.Value))
		base, endStr, ok := cutLast(k, "@")
		end, err := strconv.ParseInt(endStr, 10, 64)
		if !ok || err != nil {
			c.Err = fmt.Sprintf("output key %q is not <key>@<window end ms>", k)
			return
		}
		if end < lastEnd[base] {
			c.Reordered++
			c.example("key %s: window ending %d after the one ending %d", base, end, lastEnd[base])
		}
		lastEnd[base] = max(lastEnd[base], end)
	}
	for k, w := range want {
		g := got[k]
		switch {
		case len(g) == 0:
			c.Lost++
			c.example("window %s: no output, want count %d", k, w)
		case g[0] != w:
			// A wrong count loses or duplicates records of the window.
			if g[0] < w {
				c.Lost++
			} else {
				c.Duplicated++
			}
			c.example("window %s: count %d, want %d", k, g[0], w)
		}
		if len(g) > 1 {
			c.Duplicated += int64(len(g) - 1)
			c.example("window %s: %d outputs", k, len(g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			c.Duplicated += int64(len(g))
			c.example("window %s: %d outputs, not in the input", k, len(g))
		}
	}
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// checkJoin: q3 joins every person of Q3States with every auction of
// category Q3Category it sells, once per pair, whatever the arrival order.
// The pairs of a key come out in the order the two inputs met, which the
// input does not fix: no order is checked.
func checkJoin(c *Check, in, out []*kgo.Record) {
	c.Reordered, c.NA = -1, "a join's pairs of one key come out in the order its two inputs meet"
	persons := map[int64]bool{}
	auctions := map[int64][]int64{} // seller -> auction ids
	for _, r := range in {
		e, err := nexmark.Parse(r.Value)
		if err != nil {
			continue // the query skips them too (counted as malformed)
		}
		switch {
		case e.Person != nil && nexmark.Q3States[e.Person.State]:
			persons[e.Person.ID] = true
		case e.Auction != nil && e.Auction.Category == nexmark.Q3Category:
			auctions[e.Auction.Seller] = append(auctions[e.Auction.Seller], e.Auction.ID)
		}
	}
	want := map[string]int{}
	for p := range persons {
		for _, a := range auctions[p] {
			want[fmt.Sprintf("%d/%d", p, a)]++
		}
	}
	got := map[string]int{}
	for _, r := range out {
		res, err := nexmark.DecodeQ3Result(r.Value)
		if err != nil {
			c.Err = fmt.Sprintf("output of key %q: %v", r.Key, err)
			return
		}
		got[fmt.Sprintf("%s/%d", r.Key, res.Auction)]++
	}
	for k, w := range want {
		c.Expected += int64(w)
		g := got[k]
		if g < w {
			c.Lost += int64(w - g)
			c.example("pair %s: %d outputs, want %d", k, g, w)
		}
		if g > w {
			c.Duplicated += int64(g - w)
			c.example("pair %s: %d outputs, want %d", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			c.Duplicated += int64(g)
			c.example("pair %s: %d outputs, not in the input", k, g)
		}
	}
}

func (c *Check) example(format string, args ...any) {
	if len(c.Examples) < 5 {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

// check runs the oracle of query q over the job's topics.
func check(ctx context.Context, brokers []string, c *Check, inTopic, outTopic string) {
	in, err := readTopic(ctx, brokers, inTopic)
	if err != nil {
		c.Err = err.Error()
		return
	}
	out, err := readTopic(ctx, brokers, outTopic)
	if err != nil {
		c.Err = err.Error()
		return
	}
	c.Inputs, c.Outputs = int64(len(in)), int64(len(out))
	switch c.Query {
	case QueryCounter:
		checkCounter(c, in, out)
	case QueryWindow:
		checkWindow(c, in, out)
	case QueryJoin:
		checkJoin(c, in, out)
	default:
		c.Err = fmt.Sprintf("no oracle for query %q", c.Query)
	}
}
