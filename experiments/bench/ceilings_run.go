package bench

import (
	"context"
	"fmt"
)

// benchCeilings measures each pipeline component alone: Kafka produce and
// consume against the stack's broker, the frame codec, Pebble and the gRPC
// exchange (two peers over loopback) in this process.
func benchCeilings(ctx context.Context, o Options, stamp string) []Ceiling {
	var out []Ceiling
	show := func(c Ceiling) {
		if c.Error != "" {
			fmt.Printf("[ceilings] %-14s error: %s\n", c.Component, c.Error)
		} else {
			fmt.Printf("[ceilings] %-14s %10.0f ev/s (%d events in %.1f s)\n", c.Component, c.EventsPerSec, c.Events, c.Seconds)
		}
		out = append(out, c)
	}
	topic := "koala-bench-ceiling-" + stamp
	prod, cons := MeasureKafka(ctx, o.Kafka, topic, 4, o.KafkaRecords)
	show(prod)
	show(cons)
	if ctx.Err() != nil {
		return out
	}
	show(MeasureCodec(o.CeilingDuration))
	show(MeasurePebble(o.CeilingDuration, o.PebbleKeys))
	show(MeasureExchange(o.CeilingDuration))
	return out
}
