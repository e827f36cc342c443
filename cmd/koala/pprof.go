package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// envPprof names the address of a worker's opt-in profiling endpoint;
// envPprofFile names the file the worker writes the bound address to (the
// local stack reads it from its run dir, since the port is picked at bind).
const (
	envPprof     = "KOALA_PPROF_LISTEN"
	envPprofFile = "KOALA_PPROF_ADDR_FILE"
)

// writePprofAddr records the bound address in path (written whole, via a
// rename, so a reader never sees half a line). The returned func removes it.
func writePprofAddr(path, addr string) (func(), error) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("--pprof-addr-file %q: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("--pprof-addr-file %q: %w", path, err)
	}
	return func() { os.Remove(path) }, nil
}

// servePprof exposes Go's runtime profiles (/debug/pprof/...) on addr, so a
// worker under load can be profiled with `go tool pprof`. It binds only
// when asked; the handlers live on a private mux, never on the data plane's
// listener. It returns the bound address (addr may end in :0) and a
// function that closes the endpoint.
func servePprof(addr string, log *slog.Logger) (string, func() error, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-listen %q: want host:port such as 127.0.0.1:0: %w", addr, err)
	}
	if host == "" {
		return "", nil, fmt.Errorf("--pprof-listen %q: name the host (127.0.0.1); profiles must not be served on every interface by default", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-listen %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return ln.Addr().String(), srv.Close, nil
}
