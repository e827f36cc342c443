package kafkaio

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Reader reads an explicit set of partitions of one topic (no consumer
// group), so positions are owned by the job: a source task's checkpoint
// records them and a restored task starts from them.
type Reader struct {
	client     *kgo.Client
	topic      string
	partitions []int32

	mu    sync.Mutex
	pos   map[int32]int64     // next offset to emit
	hwm   map[int32]int64     // last high watermark seen
	endAt map[int32]time.Time // when the broker reported it
	once  sync.Once
}

// Partitions assigns partitions round-robin: partition p belongs to
// source task p mod parallelism.
func Partitions(numPartitions, parallelism, index int) []int32 {
	var out []int32
	for p := index; p < numPartitions; p += parallelism {
		out = append(out, int32(p))
	}
	return out
}

// NewReader reads parts of topic from the offsets in start (0 for a
// partition start does not name); extra adds client options (FetchOptions).
func NewReader(brokers []string, topic string, parts []int32, start map[int32]int64, extra []kgo.Opt) (*Reader, error) {
	assign := map[int32]kgo.Offset{}
	pos := map[int32]int64{}
	for _, p := range parts {
		off := start[p]
		assign[p] = kgo.NewOffset().At(off)
		pos[p] = off
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(50 * time.Millisecond), // extra may set another (FetchOptions)
	}
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka source client for %v: %w", brokers, err)
	}
	return &Reader{client: cl, topic: topic, partitions: parts, pos: pos, hwm: map[int32]int64{}, endAt: map[int32]time.Time{}}, nil
}

// Close closes the client; later calls do nothing.
func (s *Reader) Close() { s.once.Do(s.client.Close) }

// Poll fetches up to max records.
func (s *Reader) Poll(ctx context.Context, max int) kgo.Fetches {
	return s.client.PollRecords(ctx, max)
}

// Advance records what one partition's fetch showed: its high watermark
// and, when next ≥ 0, the position after the last record taken. Positions
// move once per partition and fetch, not per record. A fetch may have been
// buffered for a while (and a failed one shows no high watermark), so it
// only ever raises the known end and does not make it fresh: only
// RefreshEnds does (EndAt).
func (s *Reader) Advance(p int32, highWatermark, next int64) {
	s.mu.Lock()
	if h, ok := s.hwm[p]; !ok && highWatermark >= 0 || highWatermark > h {
		s.hwm[p] = highWatermark
	}
	if next >= 0 {
		s.pos[p] = next
	}
	s.mu.Unlock()
}

// Positions is the next offset to emit per partition.
func (s *Reader) Positions() map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int32]int64, len(s.pos))
	for p, o := range s.pos {
		out[p] = o
	}
	return out
}

// PartitionPos is one partition's position as the reader knows it.
type PartitionPos struct {
	Partition int32
	Next      int64 // next offset to emit
	// HighWatermark is the last one a fetch or RefreshEnds saw, at EndAt;
	// Known is false while there was none.
	HighWatermark int64
	Known         bool
	EndAt         time.Time
}

// AppendPositions appends every partition's position to dst, in the
// reader's partition order, as one consistent cut.
func (s *Reader) AppendPositions(dst []PartitionPos) []PartitionPos {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.partitions {
		h, known := s.hwm[p]
		dst = append(dst, PartitionPos{Partition: p, Next: s.pos[p], HighWatermark: h, Known: known, EndAt: s.endAt[p]})
	}
	return dst
}

// Lag is the records between the positions and the last high watermarks.
func (s *Reader) Lag() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lag int64
	for p, h := range s.hwm {
		if d := h - s.pos[p]; d > 0 {
			lag += d
		}
	}
	return uint64(lag)
}

// Reached reports whether every partition is at or past its end offset.
func (s *Reader) Reached(end map[int32]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.partitions {
		if s.pos[p] < end[p] {
			return false
		}
	}
	return true
}

// RefreshEnds asks the broker for the end offsets of the partitions,
// independently of polling, so Lag keeps growing while the source is
// paused or falling behind (a fetch only reports the end it reached), and
// so the source knows how fresh its view of each partition's end is
// (EndAt, which idleness depends on: dataplane/idleness.go). An end offset
// is stamped with the time the lookup was sent: records appended after
// that are not in it. Partitions the broker answered for are updated even
// when others failed; the error names the failure.
func (s *Reader) RefreshEnds(ctx context.Context) error {
	at := time.Now()
	ends, err := kadm.NewClient(s.client).ListEndOffsets(ctx, s.topic)
	s.mu.Lock()
	defer s.mu.Unlock()
	var failed []int32
	for _, p := range s.partitions {
		if o, ok := ends.Lookup(s.topic, p); ok && o.Err == nil {
			s.hwm[p], s.endAt[p] = o.Offset, at
		} else if err == nil {
			failed = append(failed, p)
		}
	}
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", s.topic, err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("end offsets of %s: no answer for partitions %v", s.topic, failed)
	}
	return nil
}
