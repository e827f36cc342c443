package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultWorkerGCPercent is the worker's GC target. A worker's live heap is
// small (tens of MB: buffers in flight, caches) while it allocates hundreds
// of MB/s of short-lived batch data (Kafka records, received frames); with
// Go's default of 100 it collected several times a second and marking took
// about a seventh of its CPU. 400 trades a few times the small live heap
// for a quarter of the collections.
const defaultWorkerGCPercent = 400

// setWorkerGC applies the GC target: the flag when given, else GOGC when
// set in the environment (the runtime already applied it), else the default.
func setWorkerGC(percent int, flagGiven bool, log *slog.Logger) error {
	if !flagGiven && os.Getenv("GOGC") != "" {
		return nil
	}
	if percent < 10 {
		return fmt.Errorf("--gogc %d: want a percentage of at least 10", percent)
	}
	debug.SetGCPercent(percent)
	log.Debug("worker GC target", "percent", percent)
	return nil
}
