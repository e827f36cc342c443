// Package kafkaio owns the data plane's Kafka clients: the partition reader
// behind a source task (explicit partitions, positions owned by the job,
// lag from end offsets) and its fetch sizing, the transactional writer
// that makes the Kafka sink exactly once with checkpoints, and the
// dead-letter path for records an operator cannot use. The operators that
// use them are the runtime's; this package knows Records and job
// parameters, not tasks.
package kafkaio
