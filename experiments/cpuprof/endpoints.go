package cpuprof

import (
	"fmt"

	"koala/deploy/local"
)

// Endpoints are the running workers under runDir that serve a pprof
// endpoint (`koala stack up --worker-pprof`), with a note for each one
// that does not. None serving one is an error naming the flag the stack
// needs.
func Endpoints(runDir string) (served []local.WorkerEndpoint, notes []string, err error) {
	eps, err := local.WorkerPprofEndpoints(runDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--profile: %w", err)
	}
	for _, ep := range eps {
		if ep.Addr != "" {
			served = append(served, ep)
		} else {
			notes = append(notes, fmt.Sprintf("worker %s (pid %d) not profiled: %s", ep.ID, ep.PID, ep.Why))
		}
	}
	if len(served) == 0 {
		return nil, notes, fmt.Errorf("--profile: no running worker under %s serves a pprof endpoint (%d running workers, no worker-wN%s address file); "+
			"restart the stack with it: `koala stack down --run-dir %s` then `koala stack up --run-dir %s --worker-pprof`",
			runDir, len(eps), local.PprofFileSuffix, runDir, runDir)
	}
	return served, notes, nil
}
