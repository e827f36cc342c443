package main

import (
	"context"
	"fmt"

	"koala/experiments"
)

// benchCeilings measures each pipeline component alone: Kafka produce and
// consume against the stack's broker, the frame codec, Pebble and the gRPC
// exchange (two peers over loopback) in this process.
func benchCeilings(ctx context.Context, o benchOpts, stamp string) []experiments.Ceiling {
	var out []experiments.Ceiling
	show := func(c experiments.Ceiling) {
		if c.Error != "" {
			fmt.Printf("[ceilings] %-14s error: %s\n", c.Component, c.Error)
		} else {
			fmt.Printf("[ceilings] %-14s %10.0f ev/s (%d events in %.1f s)\n", c.Component, c.EventsPerSec, c.Events, c.Seconds)
		}
		out = append(out, c)
	}
	topic := "koala-bench-ceiling-" + stamp
	prod, cons := experiments.MeasureKafka(ctx, splitList(o.kafka), topic, 4, o.kafkaRecords)
	show(prod)
	show(cons)
	if ctx.Err() != nil {
		return out
	}
	show(experiments.MeasureCodec(o.ceilingSec))
	show(experiments.MeasurePebble(o.ceilingSec, o.pebbleKeys))
	show(experiments.MeasureExchange(o.ceilingSec))
	return out
}
