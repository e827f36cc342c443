package examples

import (
	"time"

	"koala/dataplane"
)

// TumblingWindow counts records per key in 1-second event-time windows
// (job parameter "WindowDuration" overrides the size); the sink keeps one
// count per "<key>@<window end ms>".
var TumblingWindow = dataplane.NewQuery("example-tumbling-window").
	Describe("source -> tumbling event-time window count per key -> collect sink").
	Source("source", 1).
	Window("window", dataplane.WindowSpec{Size: time.Second, SizeParam: "WindowDuration"},
		func() dataplane.Aggregator { return dataplane.CountAggregator{} }).Parallelism(2).
	CollectSink("sink")

func init() {
	register(TumblingWindow, "the sink gets one count per window and key, not the input records; its oracle test checks it")
}
