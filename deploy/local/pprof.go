package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Worker profiling endpoints. With Config.WorkerPprof each worker serves Go's
// runtime profiles on 127.0.0.1 at a port it picks when it binds, and writes
// the bound address to <run>/worker-<id>.pprof, next to its PID file, so
// that other commands (koala bench --profile) find it. The worker removes
// the file when it exits; Down removes what a killed worker left.

// PprofFileSuffix ends the name of a worker's pprof address file.
const PprofFileSuffix = ".pprof"

// PprofAddrFile is the file worker id writes its bound pprof address to.
func PprofAddrFile(runDir, id string) string {
	return filepath.Join(runDir, "worker-"+id+PprofFileSuffix)
}

// WorkerEndpoint is one running worker of a run dir and its pprof address.
type WorkerEndpoint struct {
	ID   string // w1, w2, ...
	PID  int
	Addr string // host:port of /debug/pprof/; empty when the worker serves none
	// Why is set when Addr is empty: no address file, or a bad one.
	Why string
}

// WorkerPprofEndpoints lists every worker with a PID file under runDir whose
// process is alive, in id order, with the pprof address it recorded.
// Workers without an endpoint are listed too, with Why set; an error means
// the run dir could not be read.
func WorkerPprofEndpoints(runDir string) ([]WorkerEndpoint, error) {
	pids, err := filepath.Glob(filepath.Join(runDir, "worker-*.pid"))
	if err != nil {
		return nil, fmt.Errorf("worker PID files under %s: %w", runDir, err)
	}
	sort.Strings(pids)
	var out []WorkerEndpoint
	for _, f := range pids {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "worker-"), ".pid")
		pid, err := readPID(f)
		if err != nil || !alive(pid) {
			continue // stale PID file: no worker to profile
		}
		w := WorkerEndpoint{ID: id, PID: pid}
		w.Addr, err = readPprofAddr(PprofAddrFile(runDir, id))
		if err != nil {
			w.Why = err.Error()
		}
		out = append(out, w)
	}
	return out, nil
}

// readPprofAddr reads and checks one address file.
func readPprofAddr(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no %s: the worker serves no pprof endpoint (start the stack with `koala stack up --worker-pprof`)", path)
	}
	if err != nil {
		return "", err
	}
	addr := strings.TrimSpace(string(b))
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return "", fmt.Errorf("%s: %q is not a bound host:port", path, addr)
	}
	return addr, nil
}
