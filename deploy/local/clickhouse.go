package local

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

//go:embed clickhouse-config.xml
var clickhouseConfigTmpl string

//go:embed clickhouse-users.xml
var clickhouseUsersXML string

// clickhouseServerPath finds the server binary (Debian puts it in /usr/sbin).
func clickhouseServerPath() (string, error) {
	for _, p := range []string{"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("clickhouse-server")
	if err != nil {
		return "", fmt.Errorf("clickhouse-server not found in /usr/bin, /usr/sbin or PATH (install: apt-get install -y clickhouse-server clickhouse-client)")
	}
	return p, nil
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// renderClickHouseConfig renders config.xml for the run dir and ports.
func renderClickHouseConfig(dir string, httpPort, tcpPort int) (string, error) {
	t, err := template.New("clickhouse-config.xml").Parse(clickhouseConfigTmpl)
	if err != nil {
		return "", fmt.Errorf("clickhouse config template: %w", err)
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{"Dir": xmlEscape(dir), "HTTPPort": httpPort, "TCPPort": tcpPort})
	return b.String(), err
}

func clickhouseProcess(c Config) (*process, error) {
	bin, err := clickhouseServerPath()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.RunDir, "clickhouse")
	conf, err := renderClickHouseConfig(dir, c.ClickHouseHTTPPort, c.ClickHouseTCPPort)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "config.xml")
	u := c.ClickHouseURL()
	return &process{
		name:  "clickhouse",
		addr:  u,
		argv:  []string{bin, "--config-file=" + confPath},
		dir:   dir,
		spec:  conf + clickhouseUsersXML,
		ports: []int{c.ClickHouseHTTPPort, c.ClickHouseTCPPort},
		prepare: func(context.Context) error {
			for _, d := range []string{"data", "tmp", "user_files", "format_schemas"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					return err
				}
			}
			if err := writeFileAtomic(filepath.Join(dir, "users.xml"), []byte(clickhouseUsersXML)); err != nil {
				return err
			}
			return writeFileAtomic(confPath, []byte(conf))
		},
		ready: func(ctx context.Context, _ *process, _ time.Time, _ int64) error {
			body, err := httpGet(ctx, u+"/ping")
			if err != nil {
				return err
			}
			if strings.TrimSpace(body) != "Ok." {
				return fmt.Errorf("GET /ping answered %q, want \"Ok.\"", body)
			}
			_, err = ClickHouseQuery(ctx, u, "SELECT version()")
			return err
		},
		readyTimeout: 60 * time.Second,
		stopTimeout:  20 * time.Second,
		extraLogs:    []string{filepath.Join(dir, "clickhouse-server.err.log")},
	}, nil
}

// ClickHouseQuery runs one query over the HTTP interface and returns the
// response body.
func ClickHouseQuery(ctx context.Context, baseURL, query string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/", strings.NewReader(query))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("clickhouse %q: HTTP %d: %s", query, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

func httpGet(ctx context.Context, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return string(b), fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return string(b), nil
}
