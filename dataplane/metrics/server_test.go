package metrics

import (
	"context"
	"fmt"
	"io"
	"koala/dataplane/dptest/testlog"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests that read go to a real clickhouse-server: the native protocol
// is clickhouse-go's to speak, not something to imitate. One server, on
// free ports, serves the whole test binary (starting one takes seconds);
// each test uses its own database.
var server struct {
	once        sync.Once
	http        string
	native      string
	skip, fatal string
	stop        func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.stop != nil {
		server.stop()
	}
	os.Exit(code)
}

// clickHouseAddrs returns the HTTP URL and native address of
// KOALA_CLICKHOUSE_URL and KOALA_CLICKHOUSE_NATIVE (default
// 127.0.0.1:9000) or of a throw-away clickhouse-server, skipping the test
// if neither is available.
func clickHouseAddrs(t *testing.T) (httpURL, native string) {
	t.Helper()
	server.once.Do(startServer)
	if server.skip != "" {
		t.Skip(server.skip)
	}
	if server.fatal != "" {
		t.Fatal(server.fatal)
	}
	return server.http, server.native
}

// testClickHouse returns a client of a fresh database with the schema
// created; the database is dropped when the test ends.
func testClickHouse(t *testing.T, opts ...Option) (*ClickHouse, string) {
	t.Helper()
	httpURL, native := clickHouseAddrs(t)
	db := fmt.Sprintf("koala_%s_%d", strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())), time.Now().UnixNano())
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	ch := NewClickHouse(httpURL, native, db, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ch.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
		_ = ch.Close(context.Background())
	})
	return ch, db
}

func startServer() {
	if u := os.Getenv("KOALA_CLICKHOUSE_URL"); u != "" {
		server.http = u
		server.native = os.Getenv("KOALA_CLICKHOUSE_NATIVE")
		if server.native == "" {
			server.native = "127.0.0.1:9000"
		}
		return
	}
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		for _, p := range []string{"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		server.skip = "clickhouse-server not installed and KOALA_CLICKHOUSE_URL not set"
		return
	}
	dir, err := os.MkdirTemp("", "koala-clickhouse-")
	if err != nil {
		server.fatal = err.Error()
		return
	}
	httpPort, tcpPort := freePort(), freePort()
	if httpPort == 0 || tcpPort == 0 {
		server.fatal = "no free port"
		return
	}
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>%d</http_port>
  <tcp_port>%d</tcp_port>
  <path>%[3]s/data/</path>
  <tmp_path>%[3]s/tmp/</tmp_path>
  <user_files_path>%[3]s/user_files/</user_files_path>
  <format_schema_path>%[3]s/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
`, httpPort, tcpPort, dir)
	users := `<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`
	for name, body := range map[string]string{"config.xml": config, "users.xml": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			server.fatal = err.Error()
			return
		}
	}
	var out testlog.Buffer
	cmd := exec.Command(bin, "--config-file="+filepath.Join(dir, "config.xml"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		server.fatal = fmt.Sprintf("start %s: %v", bin, err)
		return
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	server.stop = func() {
		_ = cmd.Process.Kill() // by PID
		<-exited
		_ = os.RemoveAll(dir)
	}

	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	deadline := time.Now().Add(30 * time.Second)
	for !pingOK(base) {
		select {
		case <-exited:
			server.fatal = "clickhouse-server exited early:\n" + out.String()
			return
		default:
		}
		if time.Now().After(deadline) {
			server.fatal = "clickhouse-server not ready in 30s:\n" + out.String()
			return
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	server.http, server.native = base, fmt.Sprintf("127.0.0.1:%d", tcpPort)
}

func pingOK(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/ping")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "Ok."
}

// freePort returns a port free on 127.0.0.1 just now, or 0.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
