package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Install installs what the configured stack needs and is missing: the
// Temporal CLI (go install into <home>/bin), the Kafka broker class path
// (Maven into <home>/kafka/libs, real mode only) and Debian packages
// (clickhouse-server, and Java and Maven for real Kafka; root only).
func Install(ctx context.Context, c Config) error {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(c.Home, "install.lock"))
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer unlock()
	if err := installAptPackages(ctx, c); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := installTemporal(ctx, c); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if c.Kafka == KafkaReal {
		if err := installKafka(ctx, c); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}
	return nil
}

// installAptPackages installs missing Debian packages with apt-get.
func installAptPackages(ctx context.Context, c Config) error {
	var pkgs []string
	if _, err := clickhouseServerPath(); err != nil {
		pkgs = append(pkgs, "clickhouse-server", "clickhouse-client")
	} else {
		c.progressf("install: clickhouse-server present")
	}
	if c.Kafka == KafkaReal {
		if _, err := exec.LookPath("java"); err != nil {
			pkgs = append(pkgs, "openjdk-17-jre-headless")
		}
		if _, err := exec.LookPath("mvn"); err != nil && !kafkaLibsComplete(c) {
			pkgs = append(pkgs, "maven")
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	cmdline := "apt-get update && apt-get install -y " + strings.Join(pkgs, " ")
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing packages %s; run as root: %s", strings.Join(pkgs, ", "), cmdline)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing packages %s and no apt-get on this machine", strings.Join(pkgs, ", "))
	}
	c.progressf("install: %s", cmdline)
	start := time.Now()
	// RUNLEVEL=1 keeps the packages' init scripts from starting services on
	// the default ports; the stack runs its own processes.
	env := []string{"DEBIAN_FRONTEND=noninteractive", "RUNLEVEL=1"}
	if err := runLogged(ctx, c, "", env, "apt-get", "update", "-qq"); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	args := append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)
	if err := runLogged(ctx, c, "", env, "apt-get", args...); err != nil {
		return fmt.Errorf("apt-get install %s: %w", strings.Join(pkgs, " "), err)
	}
	c.progressf("install: apt packages done in %s", time.Since(start).Round(time.Second))
	return nil
}

// installTemporal builds the Temporal CLI into <home>/bin unless present.
func installTemporal(ctx context.Context, c Config) error {
	bin := c.TemporalBinary()
	if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
		c.progressf("install: temporal CLI present (%s)", bin)
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("temporal CLI: the Go toolchain is needed to build %s: %w", TemporalCLIModule, err)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	c.progressf("install: go install %s -> %s (about 3 min on a cold build cache)", TemporalCLIModule, filepath.Dir(bin))
	start := time.Now()
	// Build outside any module so the CLI's own go.mod rules.
	env := []string{"GOBIN=" + filepath.Dir(bin), "GOWORK=off"}
	if err := runLogged(ctx, c, os.TempDir(), env, goBin, "install", TemporalCLIModule); err != nil {
		return fmt.Errorf("temporal CLI: go install %s: %w", TemporalCLIModule, err)
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("temporal CLI: go install finished but %s is missing: %w", bin, err)
	}
	c.progressf("install: temporal CLI built in %s", time.Since(start).Round(time.Second))
	return nil
}

const kafkaLibsMarker = ".complete"

func kafkaLibsComplete(c Config) bool {
	_, err := os.Stat(filepath.Join(kafkaLibs(c), kafkaLibsMarker))
	return err == nil
}

// installKafka copies the broker's class path from Maven Central into
// <home>/kafka/libs unless a complete copy is there.
func installKafka(ctx context.Context, c Config) error {
	libs := kafkaLibs(c)
	if kafkaLibsComplete(c) {
		c.progressf("install: kafka %s libs present (%s)", KafkaVersion, libs)
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("kafka: Maven is needed to fetch the broker from Maven Central (apt-get install -y maven): %w", err)
	}
	kdir := filepath.Dir(libs)
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(kdir, "pom.xml"), []byte(kafkaPOM), 0o644); err != nil {
		return err
	}
	tmp := libs + ".tmp"
	os.RemoveAll(tmp)
	c.progressf("install: mvn dependency:copy-dependencies (kafka %s) -> %s", KafkaVersion, libs)
	start := time.Now()
	if err := runLogged(ctx, c, kdir, nil, mvn, "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory="+tmp); err != nil {
		return fmt.Errorf("kafka: mvn dependency:copy-dependencies: %w", err)
	}
	jar := filepath.Join(tmp, "kafka_2.13-"+KafkaVersion+".jar")
	if _, err := os.Stat(jar); err != nil {
		return fmt.Errorf("kafka: maven finished without %s: %w", filepath.Base(jar), err)
	}
	if err := os.WriteFile(filepath.Join(tmp, kafkaLibsMarker), []byte(KafkaVersion+"\n"), 0o644); err != nil {
		return err
	}
	os.RemoveAll(libs)
	if err := os.Rename(tmp, libs); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	c.progressf("install: kafka libs fetched in %s", time.Since(start).Round(time.Second))
	return nil
}

// runLogged runs a command, sending its output to <home>/install.log and
// returning the tail of it on failure.
func runLogged(ctx context.Context, c Config, dir string, env []string, name string, args ...string) error {
	if err := os.MkdirAll(c.Home, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(c.Home, "install.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "=== %s %s %s\n", time.Now().Format(time.RFC3339), name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("%w\n--- last lines of %s:\n%s", err, logPath, tailFile(logPath, 20))
	}
	return nil
}
