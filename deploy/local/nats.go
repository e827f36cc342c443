package local

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/transport"
)

// natsProcess runs the NATS server embedded in the koala binary
// (`koala nats-server`, JetStream off).
func natsProcess(c Config) *process {
	u := c.NATSURL()
	return &process{
		name:  "nats",
		addr:  u,
		argv:  []string{c.KoalaBinary, "nats-server", "--addr", hostPort(c.NATSPort)},
		ports: []int{c.NATSPort},
		ready: func(ctx context.Context, _ *process, _ time.Time, _ int64) error {
			nc, err := natsConnect(ctx, u, c.NATSSecurity)
			if err != nil {
				return err
			}
			defer nc.Close()
			return nc.FlushWithContext(ctx)
		},
		readyTimeout: 20 * time.Second,
		stopTimeout:  10 * time.Second,
	}
}

func natsConnect(ctx context.Context, u string, sec transport.NATSSecurity) (*nats.Conn, error) {
	timeout := 2 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), 10*time.Millisecond)
	}
	return transport.ConnectNATS(u, sec, nats.Name("koala-stack"), nats.Timeout(timeout), nats.NoReconnect())
}

// kafkaFakeProcess runs franz-go's kfake in the koala binary
// (`koala kafka-fake`), the zero-install Kafka.
func kafkaFakeProcess(c Config) *process {
	return &process{
		name:         "kafka",
		addr:         hostPort(c.KafkaPort),
		argv:         []string{c.KoalaBinary, "kafka-fake", "--addr", hostPort(c.KafkaPort), "--partitions", strconv.Itoa(4)},
		ports:        []int{c.KafkaPort},
		ready:        kafkaReady(c),
		readyTimeout: 20 * time.Second,
		stopTimeout:  10 * time.Second,
	}
}

// PingWorkers publishes one ping and collects the worker ids that answer
// within wait; sec, if given, authenticates the connection.
func PingWorkers(ctx context.Context, natsURL string, wait time.Duration, sec ...transport.NATSSecurity) (map[string]bool, error) {
	var s transport.NATSSecurity
	if len(sec) > 0 {
		s = sec[0]
	}
	nc, err := natsConnect(ctx, natsURL, s)
	if err != nil {
		return nil, fmt.Errorf("ping workers: %w", err)
	}
	defer nc.Close()
	return pingWorkers(ctx, nc, wait)
}
