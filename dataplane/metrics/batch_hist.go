package metrics

import (
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Per-batch processing time as an HDR histogram. Each task records every
// batch's time into a BatchHist; once a second the worker takes the
// batches of that second into the task_metrics row (column batch_time_hdr,
// HDR's own V2 compressed, base64 form), so that percentiles over any window
// and any set of tasks are exact to the histogram's precision: merge the
// rows of the window (MergeBatchHists).

// Range and precision of the batch-time histograms.
const (
	BatchHistMinUs   = 1
	BatchHistMaxUs   = int64(10 * time.Minute / time.Microsecond) // longer batches are counted at the max
	BatchHistSigFigs = 3
)

func newBatchHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(BatchHistMinUs, BatchHistMaxUs, BatchHistSigFigs)
}

// BatchHist is one task's histogram of per-batch processing time in µs
// since it was last taken. Observe (the task) and Take (the metrics loop)
// may run concurrently; Observe costs one uncontended lock and one
// RecordValue. The zero value is ready to use and allocates on the first
// batch.
type BatchHist struct {
	mu    sync.Mutex
	cur   *hdrhistogram.Histogram
	spare *hdrhistogram.Histogram // the previous cur, reset, reused by Take
}

// Observe records one batch that took d; times under 1 µs count as 1 µs,
// times over BatchHistMaxUs as BatchHistMaxUs.
func (b *BatchHist) Observe(d time.Duration) {
	us := min(max(d.Microseconds(), BatchHistMinUs), BatchHistMaxUs)
	b.mu.Lock()
	if b.cur == nil {
		b.cur = newBatchHistogram()
	}
	// us is within the histogram's range, so this cannot fail.
	_ = b.cur.RecordValue(us)
	b.mu.Unlock()
}

// Take returns the batches observed since the previous Take, encoded
// (V2 compressed, base64), and starts a new interval. It returns "" when no
// batch was observed. Encoding happens outside the lock, on a swapped-out
// histogram, so the task is not held up.
func (b *BatchHist) Take() (string, error) {
	b.mu.Lock()
	h := b.cur
	if h == nil || h.TotalCount() == 0 {
		b.mu.Unlock()
		return "", nil
	}
	next := b.spare
	if next == nil {
		next = newBatchHistogram()
	}
	b.cur, b.spare = next, nil
	b.mu.Unlock()

	enc, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	h.Reset()
	b.mu.Lock()
	b.spare = h
	b.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("metrics: encode batch-time histogram: %w", err)
	}
	return string(enc), nil
}

// BatchPercentiles summarise a merged batch-time histogram, in µs.
type BatchPercentiles struct {
	Count uint64 `json:"count"`
	P50Us int64  `json:"p50_us"`
	P99Us int64  `json:"p99_us"`
	MaxUs int64  `json:"max_us"`
}

// MergeBatchHists decodes the encoded histograms (as Take returns them;
// empty strings are skipped) and returns the percentiles of all their
// batches together; ok is false when there were none.
func MergeBatchHists(encoded []string) (p BatchPercentiles, ok bool, err error) {
	all := newBatchHistogram()
	for i, e := range encoded {
		if e == "" {
			continue
		}
		h, err := hdrhistogram.Decode([]byte(e))
		if err != nil {
			return p, false, fmt.Errorf("metrics: batch-time histogram %d of %d: %w", i+1, len(encoded), err)
		}
		if dropped := all.Merge(h); dropped > 0 {
			return p, false, fmt.Errorf("metrics: batch-time histogram %d of %d: %d values outside 1 µs – %d µs", i+1, len(encoded), dropped, BatchHistMaxUs)
		}
	}
	n := all.TotalCount()
	if n == 0 {
		return p, false, nil
	}
	return BatchPercentiles{Count: uint64(n), P50Us: all.ValueAtQuantile(50), P99Us: all.ValueAtQuantile(99), MaxUs: all.Max()}, true, nil
}
