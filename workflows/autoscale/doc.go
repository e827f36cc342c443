// Package autoscale is the autoscaler's policy as pure functions: from
// per-task metric rows to each operator's load (Aggregate), from loads to
// DS2 target parallelisms (Targets), and from targets to a decision that
// has passed every guard (Decide). The Autoscale workflow (package
// workflows) calls them between its activities; nothing here does I/O,
// reads a clock, draws random numbers or lets map order show in a result,
// so workflow code may call these functions and replay gets the same
// answer.
//
// DS2 (Kalavri et al., OSDI 2018): an operator's true processing rate is
// the records it processes per second of busy time, i.e. excluding the
// time it waits for input; its target parallelism is the rate it must
// absorb divided by the true rate of one task, at a target utilization.
// The rate to absorb is computed in one pass from the sources downstream:
// a source must absorb what arrives in Kafka plus the extra rate that
// drains the current lag within CatchUpSeconds, and every operator passes
// on its input times its observed selectivity (records out per record in).
//
// Guards (Decide): no decision while a reconfiguration of the job runs;
// none from metrics of the StabilizationSeconds after a reconfiguration
// ended; a scale-in only after DS2 asked for fewer tasks for
// ScaleDownDelaySeconds (to the most it asked for meanwhile); a change of
// at least MinChange tasks; no oscillation (an operator scaled out is
// scaled back in only once its input fell by ReversalDrop below the rate
// that made it scale out); parallelism within 1..min(NumBuckets,
// MaxParallelism), a source's also within its topic's partitions.
package autoscale
