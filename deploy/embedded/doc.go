// Package embedded builds the servers the koala binary carries so that the
// local stack needs no install for them: NATS (always) and a kfake Kafka
// broker (--kafka=embedded). The stack runs each as a plain process
// (`koala nats-server`, `koala kafka-fake`); cmd/koala wires their flags.
package embedded
