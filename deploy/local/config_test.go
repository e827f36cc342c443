package local

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultConfig(t *testing.T) {
	t.Setenv("KOALA_HOME", "/opt/koala-home")
	c := DefaultConfig()
	if c.Home != "/opt/koala-home" || c.RunDir != filepath.Join("/opt/koala-home", "run") {
		t.Fatalf("Home/RunDir = %q/%q", c.Home, c.RunDir)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	checks := map[string]string{
		c.TemporalAddr():         "127.0.0.1:7233",
		c.TemporalUIURL():        "http://127.0.0.1:8233",
		c.NATSURL():              "nats://127.0.0.1:4222",
		c.KafkaBrokers()[0]:      "127.0.0.1:9092",
		c.ClickHouseURL():        "http://127.0.0.1:8123",
		c.ClickHouseNativeAddr(): "127.0.0.1:9000",
	}
	for got, want := range checks {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if env := strings.Join(c.Env(), " "); !strings.Contains(env, "KOALA_HOME=/") {
		t.Errorf("Env() = %q lacks an absolute KOALA_HOME", env)
	}
	if env := strings.Join(c.Env(), " "); !strings.Contains(env, "KOALA_CLICKHOUSE_NATIVE=127.0.0.1:9000") ||
		!strings.Contains(env, "KOALA_CLICKHOUSE_URL=http://127.0.0.1:8123") {
		t.Errorf("Env() = %q lacks the ClickHouse addresses", env)
	}
	if c.Kafka != KafkaReal {
		t.Errorf("Kafka = %q, want %q", c.Kafka, KafkaReal)
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error
	}{
		{"kafka mode", func(c *Config) { c.Kafka = "redpanda" }, []string{"Kafka", `"redpanda"`, `"real"`, `"embedded"`}},
		{"port zero", func(c *Config) { c.NATSPort = 0 }, []string{"NATSPort", "1..65535"}},
		{"port too big", func(c *Config) { c.ClickHouseTCPPort = 70000 }, []string{"ClickHouseTCPPort", "1..65535"}},
		{"duplicate port", func(c *Config) { c.KafkaPort = c.TemporalPort }, []string{"KafkaPort", "TemporalPort", "distinct"}},
		{"workers", func(c *Config) { c.Workers = -1 }, []string{"Workers", "0..64"}},
		{"ui port", func(c *Config) { c.UI, c.UIPort = true, 0 }, []string{"UIPort", "1..65535"}},
		{"ui port taken", func(c *Config) { c.UI, c.UIPort = true, c.NATSPort }, []string{"UIPort", "NATSPort", "distinct"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate accepted an invalid config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// The controller port is unused, so free, in embedded mode.
	c := DefaultConfig()
	c.Kafka = KafkaEmbedded
	c.KafkaControllerPort = 0
	if err := c.Validate(); err != nil {
		t.Errorf("embedded mode with no controller port: %v", err)
	}
}

func TestFreePortConfig(t *testing.T) {
	dir := t.TempDir()
	c, err := FreePortConfig(dir, filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != dir || c.RunDir != filepath.Join(dir, "run") {
		t.Fatalf("Home/RunDir = %q/%q", c.Home, c.RunDir)
	}
	seen := map[int]string{}
	for _, p := range c.portFields() {
		if *p.ptr <= 0 {
			t.Errorf("%s = %d", p.name, *p.ptr)
		}
		if other, dup := seen[*p.ptr]; dup {
			t.Errorf("%s and %s share port %d", p.name, other, *p.ptr)
		}
		seen[*p.ptr] = p.name
		if err := portFree(*p.ptr); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRenderClickHouseConfig(t *testing.T) {
	conf, err := renderClickHouseConfig("/r&d/run/clickhouse", 18123, 19000)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<yandex>", "<listen_host>127.0.0.1</listen_host>", "<http_port>18123</http_port>",
		"<tcp_port>19000</tcp_port>", "<path>/r&amp;d/run/clickhouse/data/</path>", "<level>warning</level>",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q", want)
		}
	}
	if strings.Contains(conf, "<interserver_http_port>") {
		t.Error("config binds an interserver port")
	}
}

func TestKafkaServerProperties(t *testing.T) {
	c := DefaultConfig()
	props := kafkaServerProperties(c, "/run/kafka/data")
	for _, want := range []string{
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.quorum.voters=1@127.0.0.1:9093",
		"process.roles=broker,controller",
		"log.dirs=/run/kafka/data",
		"num.partitions=4",
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"auto.create.topics.enable=true",
	} {
		if !strings.Contains(props, want+"\n") {
			t.Errorf("server.properties lacks %q", want)
		}
	}
	for i := 0; i < 1000; i++ {
		id, err := newKafkaClusterID()
		if err != nil || len(id) != 22 || id[0] == '-' {
			t.Fatalf("cluster id %q, %v", id, err)
		}
	}
}
