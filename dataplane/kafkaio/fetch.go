package kafkaio

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/control"
)

// Source fetch sizing
//
// A Kafka fetch answered as soon as any byte is there hands the source a
// few milliseconds of input at a time (one producer linger), so every batch
// pays the per-batch costs — a gRPC message per hop, a state multi-get and
// a Pebble commit per stateful task — for a hundred records or so. Asking
// the broker to wait for SourceFetchMinBytes, at most SourceFetchMaxWaitMs,
// makes batches of several hundred to BatchSize records at steady rates,
// for at most that wait of added latency when input is sparse.

// Defaults of the source's fetch sizing.
const (
	DefaultSourceFetchMinBytes  = 64 << 10
	DefaultSourceFetchMaxWaitMs = 25
	maxSourceFetchMinBytes      = 64 << 20
	maxSourceFetchMaxWaitMs     = 10_000
)

// FetchOptions returns the fetch options a job's source tasks use.
func FetchOptions(job control.JobSpec) ([]kgo.Opt, error) {
	minBytes, err := control.IntParam(job, control.ParamSourceFetchMinBytes, DefaultSourceFetchMinBytes, 1, maxSourceFetchMinBytes, "bytes")
	if err != nil {
		return nil, err
	}
	waitMs, err := control.IntParam(job, control.ParamSourceFetchMaxWaitMs, DefaultSourceFetchMaxWaitMs, 1, maxSourceFetchMaxWaitMs, "milliseconds")
	if err != nil {
		return nil, err
	}
	return []kgo.Opt{kgo.FetchMinBytes(int32(minBytes)), kgo.FetchMaxWait(time.Duration(waitMs) * time.Millisecond)}, nil
}
