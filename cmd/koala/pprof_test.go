package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServePprof(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, bad := range []string{":0", "localhost", "127.0.0.1:notaport"} {
		if _, _, err := servePprof(bad, log); err == nil || !strings.Contains(err.Error(), "--pprof-listen") {
			t.Errorf("servePprof(%q): err %v, want an error naming --pprof-listen", bad, err)
		}
	}
	addr, closePprof, err := servePprof("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer closePprof()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("GET goroutine profile: %s: %.200s", resp.Status, body)
	}
}

func TestSetWorkerGCRejectsTinyTargets(t *testing.T) {
	if err := setWorkerGC(5, true, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--gogc 5") {
		t.Fatalf("setWorkerGC(5): err %v, want an error naming --gogc 5", err)
	}
}

func TestWritePprofAddr(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker-w1.pprof")
	remove, err := writePprofAddr(path, "127.0.0.1:41238")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "127.0.0.1:41238\n" {
		t.Fatalf("%s: %q, %v", path, b, err)
	}
	remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s after remove: %v", path, err)
	}
	if _, err := writePprofAddr(filepath.Join(t.TempDir(), "no", "such", "dir"), "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--pprof-addr-file") {
		t.Fatalf("unwritable path: %v", err)
	}
}
