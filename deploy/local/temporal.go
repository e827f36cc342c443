package local

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// TemporalCLIModule is the Temporal CLI (with its dev server and web UI) the
// stack installs; newer tags do not build from the module proxy (DESIGN §8).
const TemporalCLIModule = "github.com/temporalio/cli/cmd/temporal@v1.5.1"

// temporalDynamicConfig cuts an activity round trip from ~100 ms to ~10 ms.
var temporalDynamicConfig = []string{
	"history.transferProcessorMaxPollRPS=10000",
	"matching.numTaskqueueReadPartitions=1",
	"matching.numTaskqueueWritePartitions=1",
}

// TemporalBinary is where Install puts the temporal CLI.
func (c Config) TemporalBinary() string {
	return filepath.Join(c.withDefaults().Home, "bin", "temporal")
}

func temporalProcess(c Config) *process {
	argv := []string{c.TemporalBinary(), "server", "start-dev",
		"--ip", Host,
		"--port", strconv.Itoa(c.TemporalPort),
		"--ui-port", strconv.Itoa(c.TemporalUIPort),
		"--db-filename", filepath.Join(c.RunDir, "temporal.db"),
		"--log-level", "warn",
	}
	for _, kv := range temporalDynamicConfig {
		argv = append(argv, "--dynamic-config-value", kv)
	}
	return &process{
		name:  "temporal",
		addr:  c.TemporalAddr() + " ui " + c.TemporalUIURL(),
		argv:  argv,
		ports: []int{c.TemporalPort, c.TemporalUIPort},
		ready: func(ctx context.Context, _ *process, _ time.Time, _ int64) error {
			if err := tcpOpen(ctx, c.TemporalAddr()); err != nil {
				return fmt.Errorf("frontend: %w", err)
			}
			if _, err := httpGet(ctx, c.TemporalUIURL()+"/"); err != nil {
				return fmt.Errorf("web UI: %w", err)
			}
			return temporalCLI(ctx, c, "operator", "namespace", "describe", "--namespace", "default")
		},
		readyTimeout: 60 * time.Second,
		stopTimeout:  15 * time.Second,
	}
}

// temporalCLI runs the installed temporal CLI against the stack's frontend.
func temporalCLI(ctx context.Context, c Config, args ...string) error {
	args = append(args, "--address", c.TemporalAddr())
	out, err := exec.CommandContext(ctx, c.TemporalBinary(), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("temporal %s: %w: %s", strings.Join(args, " "), err, lastLine(string(out)))
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
