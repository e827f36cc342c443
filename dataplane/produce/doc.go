// Package produce owns the input side of experiments: the registry of
// record generators (uniform and sequential keys here, Zipf-skewed keys,
// and the query generators that register themselves), the rate schedule
// of the artifact's RateLimiterConfig, the splitting of one produce request
// over several producers, and the Kafka producer that writes generated
// records at a rate. Workers run producers (so their CPU counts with the
// pipeline's) and `koala produce` runs one in the CLI.
package produce
