// Package local owns the single-machine stack: it installs, starts, checks
// and stops Temporal, NATS, Kafka and ClickHouse (and optionally the koala
// controller and workers) as plain processes bound to 127.0.0.1.
//
// Every process gets a PID file, a log file and a readiness check under the
// run directory, and is stopped by PID (and process group). Up and Down are
// idempotent: Up skips services that are already running with the same
// settings, Down stops whatever a PID file under the run directory names.
package local

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/transport"
)

// Kafka modes.
const (
	KafkaReal     = "real"     // Apache Kafka broker (KRaft) assembled from Maven Central
	KafkaEmbedded = "embedded" // franz-go kfake in a `koala kafka-fake` process, no install
)

// Default ports of the local stack.
const (
	DefaultTemporalPort        = 7233
	DefaultTemporalUIPort      = 8233
	DefaultNATSPort            = 4222
	DefaultKafkaPort           = 9092
	DefaultKafkaControllerPort = 9093
	DefaultClickHouseHTTPPort  = 8123
	DefaultClickHouseTCPPort   = 9000
)

// Host is the only address the stack binds to.
const Host = "127.0.0.1"

// Config describes one local stack.
type Config struct {
	Home   string // install cache: bin/temporal, kafka/libs; default $KOALA_HOME or "<cwd>/.koala"
	RunDir string // pid, log, data files; default Home+"/run"
	Kafka  string // "real" (default) or "embedded"

	TemporalPort, TemporalUIPort, NATSPort, KafkaPort, KafkaControllerPort, ClickHouseHTTPPort, ClickHouseTCPPort int

	KoalaBinary string // default os.Executable()
	Controller  bool
	Workers     int
	// WorkerPprof starts every worker with a Go runtime profiling endpoint
	// (/debug/pprof/) on 127.0.0.1 at a port it picks, whose address it
	// writes to PprofAddrFile (pprof.go). Off by default: no extra listener.
	WorkerPprof bool
	// UI starts `koala ui` on 127.0.0.1:UIPort after the workers.
	UI       bool
	UIPort   int
	Progress io.Writer // where install/start progress lines go (nil = io.Discard)
	// NATSSecurity is what the stack's own NATS checks authenticate with;
	// the processes it starts read the same settings from the inherited
	// KOALA_NATS_* environment.
	NATSSecurity transport.NATSSecurity
}

// DefaultConfig returns the default stack: real Kafka, default ports, home
// from $KOALA_HOME or ./.koala, no controller and no workers.
func DefaultConfig() Config {
	home := os.Getenv(control.EnvHome)
	if home == "" {
		home = control.DefaultHome
		if wd, err := os.Getwd(); err == nil {
			home = filepath.Join(wd, control.DefaultHome)
		}
	}
	exe, _ := os.Executable()
	return Config{
		Home:                home,
		RunDir:              filepath.Join(home, "run"),
		Kafka:               KafkaReal,
		TemporalPort:        DefaultTemporalPort,
		TemporalUIPort:      DefaultTemporalUIPort,
		NATSPort:            DefaultNATSPort,
		KafkaPort:           DefaultKafkaPort,
		KafkaControllerPort: DefaultKafkaControllerPort,
		ClickHouseHTTPPort:  DefaultClickHouseHTTPPort,
		ClickHouseTCPPort:   DefaultClickHouseTCPPort,
		UIPort:              DefaultUIPort,
		KoalaBinary:         exe,
	}
}

// FreePortConfig returns DefaultConfig with the given directories and every
// port set to a distinct port that is free right now. It is meant for tests.
func FreePortConfig(home, runDir string) (Config, error) {
	c := DefaultConfig()
	c.Home, c.RunDir = home, runDir
	ports := c.portFields()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	// Ports from the kernel's ephemeral range can be taken for a moment by
	// any outgoing connection, which breaks restarting a service on its
	// port; pick below that range, starting at a random offset.
	lo, hi := nonEphemeralRange()
	next := lo + int(time.Now().UnixNano()%int64(hi-lo))
	for _, p := range ports {
		var ln net.Listener
		for tries := 0; ln == nil; tries++ {
			if tries == hi-lo {
				return Config{}, fmt.Errorf("free port for %s: nothing free in %d..%d", p.name, lo, hi)
			}
			port := lo + (next-lo)%(hi-lo)
			next++
			l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(port)))
			if err == nil {
				ln = l
			}
		}
		lns = append(lns, ln) // keep it open so the next pick differs
		*p.ptr = ln.Addr().(*net.TCPAddr).Port
	}
	return c, nil
}

// nonEphemeralRange is a port range below the kernel's ephemeral ports.
func nonEphemeralRange() (lo, hi int) {
	lo, hi = 20000, 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	var elo, ehi int
	if _, err := fmt.Sscan(string(data), &elo, &ehi); err == nil && elo > lo+1000 {
		hi = elo
	}
	return lo, hi
}

type portField struct {
	name string
	ptr  *int
}

func (c *Config) portFields() []portField {
	return []portField{
		{"TemporalPort", &c.TemporalPort},
		{"TemporalUIPort", &c.TemporalUIPort},
		{"NATSPort", &c.NATSPort},
		{"KafkaPort", &c.KafkaPort},
		{"KafkaControllerPort", &c.KafkaControllerPort},
		{"ClickHouseHTTPPort", &c.ClickHouseHTTPPort},
		{"ClickHouseTCPPort", &c.ClickHouseTCPPort},
	}
}

// withDefaults fills empty fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Home == "" {
		c.Home = d.Home
	}
	if c.RunDir == "" {
		c.RunDir = filepath.Join(c.Home, "run")
	}
	if c.Kafka == "" {
		c.Kafka = KafkaReal
	}
	if c.KoalaBinary == "" {
		c.KoalaBinary = d.KoalaBinary
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if abs, err := filepath.Abs(c.Home); err == nil {
		c.Home = abs
	}
	if abs, err := filepath.Abs(c.RunDir); err == nil {
		c.RunDir = abs
	}
	if c.KoalaBinary != "" {
		if abs, err := filepath.Abs(c.KoalaBinary); err == nil {
			c.KoalaBinary = abs
		}
	}
	return c
}

// Validate checks the settings; each error names the field and the allowed
// values. Empty Home, RunDir, Kafka and KoalaBinary are allowed (defaults).
func (c *Config) Validate() error {
	var errs []error
	switch c.Kafka {
	case "", KafkaReal, KafkaEmbedded:
	default:
		errs = append(errs, fmt.Errorf("Kafka: %q is not a Kafka mode; allowed: %q or %q", c.Kafka, KafkaReal, KafkaEmbedded))
	}
	if c.Workers < 0 || c.Workers > 64 {
		errs = append(errs, fmt.Errorf("Workers: %d out of range; allowed: 0..64", c.Workers))
	}
	seen := map[int]string{}
	for _, p := range c.portFields() {
		if p.name == "KafkaControllerPort" && c.Kafka == KafkaEmbedded {
			continue // unused by kfake
		}
		v := *p.ptr
		if v < 1 || v > 65535 {
			errs = append(errs, fmt.Errorf("%s: %d out of range; allowed: 1..65535", p.name, v))
			continue
		}
		if other, dup := seen[v]; dup {
			errs = append(errs, fmt.Errorf("%s: port %d is also %s; every port must be distinct", p.name, v, other))
			continue
		}
		seen[v] = p.name
	}
	if c.UI {
		switch other, dup := seen[c.UIPort]; {
		case c.UIPort < 1 || c.UIPort > 65535:
			errs = append(errs, fmt.Errorf("UIPort: %d out of range; allowed: 1..65535", c.UIPort))
		case dup:
			errs = append(errs, fmt.Errorf("UIPort: port %d is also %s; every port must be distinct", c.UIPort, other))
		}
	}
	return errors.Join(errs...)
}

func hostPort(port int) string { return net.JoinHostPort(Host, strconv.Itoa(port)) }

// TemporalAddr is the host:port of the Temporal frontend.
func (c Config) TemporalAddr() string { return hostPort(c.TemporalPort) }

// TemporalUIURL is the URL of the Temporal web UI.
func (c Config) TemporalUIURL() string { return "http://" + hostPort(c.TemporalUIPort) }

// NATSURL is the nats:// URL of the NATS server.
func (c Config) NATSURL() string { return "nats://" + hostPort(c.NATSPort) }

// KafkaBrokers is the bootstrap broker list.
func (c Config) KafkaBrokers() []string { return []string{hostPort(c.KafkaPort)} }

// ClickHouseURL is the ClickHouse HTTP interface.
func (c Config) ClickHouseURL() string { return "http://" + hostPort(c.ClickHouseHTTPPort) }

// ClickHouseNativeAddr is the host:port of the ClickHouse native (TCP)
// interface, over which the metrics tables are created and read.
func (c Config) ClickHouseNativeAddr() string { return hostPort(c.ClickHouseTCPPort) }

// Env is the environment koala processes get so they find the stack.
func (c Config) Env() []string {
	home := c.Home
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	return []string{
		// Absolute: the stack's processes run in other directories, and
		// the snapshots and checkpoint stores they name live under it.
		control.EnvHome + "=" + home,
		"KOALA_TEMPORAL_ADDR=" + c.TemporalAddr(),
		"KOALA_NATS_URL=" + c.NATSURL(),
		"KOALA_KAFKA_BROKERS=" + c.KafkaBrokers()[0],
		"KOALA_CLICKHOUSE_URL=" + c.ClickHouseURL(),
		"KOALA_CLICKHOUSE_NATIVE=" + c.ClickHouseNativeAddr(),
	}
}

func (c Config) progressf(format string, args ...any) {
	w := c.Progress
	if w == nil {
		return
	}
	fmt.Fprintf(w, format+"\n", args...)
}
