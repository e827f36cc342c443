package experiments

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"koala/dataplane/control"
	"koala/queries/nexmark"
	"koala/workflows"
)

// Preparing a config for this machine
//
// PrepareConfig is what `koala run` (and `koala suite`, for every entry)
// does with a config before it starts anything, and all that `--check`
// does: parse it, scale it (Scale), check its query and operators
// (CheckQuery), its hosts against the stack's, its trace files and its
// warm-up snapshot. It reports every problem, joined.

// RunOptions say how configs run on this machine.
type RunOptions struct {
	Scale Scale
	// NoHostMapping turns host mapping off: the artifact's host lists must
	// then name hosts of the stack (StackHosts). With mapping on (the
	// default) every host maps onto the stack's workers: tasks are spread
	// over them, producers run on ProducerWorkers or the task workers.
	NoHostMapping bool
	// StackHosts are the stack's hosts (default LocalHosts: the local
	// stack runs every worker on this machine).
	StackHosts []string
	// SkipEnvironment leaves out what depends on this machine's files
	// (warm-up snapshots, trace files): a check of the configs alone.
	SkipEnvironment bool
	// builtBefore maps the snapshot directories that warm-ups earlier in
	// the same suite build (LoadSuiteFor) to the config that builds each:
	// loading one is no error, building it again is.
	builtBefore map[string]string
	// siblings, when set, lists the configs beside the one prepared (where
	// its warm-up config is looked for) for a config that is not a file in
	// the tree: a suite entry read from a git branch (suite_git.go).
	siblings func() []configFile
	// keepBuilt: a warm-up whose snapshot exists is no error (FindWarmUp
	// reports that snapshot instead of building it again).
	keepBuilt bool
}

// LocalHosts are the names of this machine.
func LocalHosts() []string {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}

// PrepareConfig loads the config at path and prepares it to run (see the
// comment at the top). Notes are returned even with an error.
func PrepareConfig(path string, o RunOptions) (workflows.ExperimentInput, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return workflows.ExperimentInput{}, nil, fmt.Errorf("config: %w", err)
	}
	return prepareData(path, data, o)
}

// prepareData is PrepareConfig of a config's contents; path names it.
func prepareData(path string, data []byte, o RunOptions) (workflows.ExperimentInput, []string, error) {
	in, notes, err := ParseConfigNotes(path, data)
	if err != nil {
		return in, notes, err
	}
	more, err := Prepare(path, &in, o)
	return in, append(notes, more...), err
}

// Prepare is PrepareConfig for a parsed config; path names it in messages
// and anchors the search for its warm-up config.
func Prepare(path string, in *workflows.ExperimentInput, o RunOptions) ([]string, error) {
	var notes []string
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("config %s: %w", path, err))
		}
	}
	note, err := o.Scale.Apply(in)
	if err != nil {
		return notes, fmt.Errorf("config %s: %w", path, err)
	}
	if note != "" {
		notes = append(notes, "config "+path+": "+note)
	}
	fail(CheckQuery(*in))
	note, err = checkHosts(*in, o)
	fail(err)
	if note != "" {
		notes = append(notes, "config "+path+": "+note)
	}
	if !o.SkipEnvironment {
		if note := traceFiles(in); note != "" {
			notes = append(notes, "config "+path+": "+note)
		}
		fail(checkWarmUp(path, *in, o))
	}
	return notes, errors.Join(errs...)
}

// namedHosts lists, per host field, the hosts a config places tasks or
// producers on.
func namedHosts(in workflows.ExperimentInput) map[string][]string {
	out := map[string][]string{}
	for _, f := range []string{"WorkerIPs", "ProducerIPs"} {
		if v := in.Params[f]; v != "" {
			for _, h := range strings.Split(v, ",") {
				if !slices.Contains(out[f], h) {
					out[f] = append(out[f], h)
				}
			}
		}
	}
	const f = "InitialCustomTaskPlacement"
	if v := in.Params[f]; v != "" {
		for _, e := range strings.Split(v, ",") {
			if _, h, ok := strings.Cut(e, "="); ok && !slices.Contains(out[f], h) {
				out[f] = append(out[f], h)
			}
		}
	}
	return out
}

// checkHosts checks the config's hosts against the stack's: with host
// mapping off each must be one of them; with it on, a note says how many
// map onto the stack's workers.
func checkHosts(in workflows.ExperimentInput, o RunOptions) (string, error) {
	stack := o.StackHosts
	if len(stack) == 0 {
		stack = LocalHosts()
	}
	named := namedHosts(in)
	var errs []error
	var mapped []string
	for _, f := range sortedKeys(named) {
		var missing []string
		for _, h := range named[f] {
			if !slices.Contains(stack, h) {
				missing = append(missing, h)
				if !slices.Contains(mapped, h) {
					mapped = append(mapped, h)
				}
			}
		}
		if len(missing) > 0 && o.NoHostMapping {
			errs = append(errs, fmt.Errorf("field %q: %s %s not a host of the stack (stack hosts: %s); host mapping is off (--map-hosts=false), so every host must be the stack's: name them, or run with host mapping on to map the config's hosts onto the stack's workers",
				f, strings.Join(missing, ", "), plural(len(missing), "is", "are"), strings.Join(stack, ", ")))
		}
	}
	if len(errs) > 0 || len(mapped) == 0 {
		return "", errors.Join(errs...)
	}
	return fmt.Sprintf("host mapping: %d host(s) the stack lacks (%s) map onto the stack's workers (tasks spread over them, producers on ProducerWorkers or the task workers)", len(mapped), abbreviate(mapped, 4)), nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// abbreviate joins the first n items and counts the rest.
func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// traceFiles maps an artifact config's relative FilePath entries under
// $KOALA_HOME (the artifact's are relative to its WorkDir) and, when a
// file is not there, lets the query's synthetic generator make the records
// instead, saying so. Other configs' FilePath is used as written.
func traceFiles(in *workflows.ExperimentInput) string {
	v := in.Params["FilePath"]
	if _, artifact := in.Params["WorkDir"]; !artifact || v == "" {
		return ""
	}
	var paths, missing []string
	for _, p := range strings.Split(v, ",") {
		if !filepath.IsAbs(p) {
			p = filepath.Join(control.Home(), p)
		}
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
		paths = append(paths, p)
	}
	if len(missing) == 0 {
		in.Params["FilePath"] = strings.Join(paths, ",")
		return ""
	}
	params := make(map[string]string, len(in.Params))
	for k, v := range in.Params {
		params[k] = v
	}
	delete(params, "FilePath")
	in.Params = params
	return fmt.Sprintf("field \"FilePath\": %d of %d trace files are not on this machine (%s); the synthetic %q generator makes the records instead (put the artifact's trace files under %s to replay them)",
		len(missing), len(paths), abbreviate(missing, 1), in.Producer.Generator, control.Home())
}

// checkNexmarkGenerator builds the Nexmark generator the producers will
// build, so a knob combination it refuses fails the config before any
// workflow starts instead of at the producers' start, minutes into a
// comparison (HotSellerRatio with NexmarkSellers "uniform", say).
func checkNexmarkGenerator(in workflows.ExperimentInput) error {
	if in.Producer.Generator != nexmark.GeneratorName {
		return nil
	}
	_, err := nexmark.NewGenerator(nexmark.ConfigOf(control.ProduceRequest{
		Generator: in.Producer.Generator, RatePerSec: in.Producer.RatePerSec, NumKeys: in.Producer.NumKeys, Seed: in.Producer.Seed,
		ValueSize: in.Producer.ValueSize, Skew: in.Producer.Skew, MaxEvents: in.Producer.MaxEvents, Nexmark: in.Producer.Nexmark,
	}))
	if err != nil {
		return fmt.Errorf("NexmarkLogicalSourceConfigs / NexmarkSellers: %w", err)
	}
	return nil
}
