package local

import (
	"context"
	"strconv"
	"time"
)

// DefaultUIPort is where `koala ui` listens when the stack starts it.
const DefaultUIPort = 8280

// UIReadyLine starts the line `koala ui` prints once it listens.
const UIReadyLine = "koala ui serving on"

// uiProcess is `koala ui` for the stack: it finds the stack's services
// with the same flags the stack was given.
func uiProcess(c Config) *process {
	addr := hostPort(c.UIPort)
	return &process{
		name: "ui",
		addr: "http://" + addr,
		argv: []string{c.KoalaBinary, "ui", "--addr", addr,
			"--home", c.Home, "--run-dir", c.RunDir,
			"--temporal-ui-port", strconv.Itoa(c.TemporalUIPort), "--nats-port", strconv.Itoa(c.NATSPort),
			"--clickhouse-http-port", strconv.Itoa(c.ClickHouseHTTPPort), "--clickhouse-tcp-port", strconv.Itoa(c.ClickHouseTCPPort)},
		env:   c.Env(),
		ports: []int{c.UIPort},
		ready: func(ctx context.Context, _ *process, _ time.Time, _ int64) error {
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := httpGet(hctx, "http://"+addr+"/healthz")
			return err
		},
		readyTimeout: 30 * time.Second,
		stopTimeout:  10 * time.Second,
	}
}

// UIURL is the address of the stack's `koala ui`.
func (c Config) UIURL() string { return "http://" + hostPort(c.UIPort) }
