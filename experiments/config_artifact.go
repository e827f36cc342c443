package experiments

import (
	"net"
	"regexp"
	"slices"
	"strings"

	"koala/queries"
	"koala/workflows"
)

// Artifact deployment fields
//
// The artifact's configs describe a cluster: host lists (AllNodeIPs,
// KafkaClusterIPs, ProducerIPs, WorkerIPs), where each operator's first
// tasks run (InitialCustomTaskPlacement) and which Nexmark event streams the
// producers generate (NexmarkLogicalSourceConfigs). koala runs an
// experiment on the workers of its stack, so:
//
//   - host lists are validated and kept in Params; the tasks go to the
//     stack's workers however many entries WorkerIPs has (a list naming one
//     address is one host: every entry maps to the local workers), Kafka is
//     the stack's (KafkaClusterIPs never overrides it; KafkaBrokers and
//     KafkaIPs do), and without NumProducers one producer runs per
//     ProducerIPs entry;
//   - InitialCustomTaskPlacement entries ("operator: address") must name an
//     operator of the query and a listed host; with one host every
//     placement holds on the local workers;
//   - NexmarkLogicalSourceConfigs select the "nexmark" generator and the
//     event types it produces; their NexmarkSourceConfig knobs (and the
//     same knobs at the top level) reach the generator through the produce
//     request.

// hostFields are the artifact's host lists.
var hostFields = []string{"AllNodeIPs", "KafkaClusterIPs", "ProducerIPs", "WorkerIPs"}

// partitionPolicies are the PartitionPolicy values koala accepts. Keys
// hash to a fixed number of buckets, spread evenly and contiguously over
// the tasks, and a rescale moves the fewest buckets that keep the spread
// even: the artifact's "consistent-even". Its "uniform" policy
// (internal/keyby/partition in the artifact) lays the buckets out the same
// way at the start but recomputes the contiguous layout at a rescale,
// moving buckets between tasks that stay too; the artifact uses it for
// its DRRS runs and their warm-ups. Here "uniform" gets the same first
// layout, and a rescale still moves the fewest buckets (noted when the
// config rescales).
var partitionPolicies = []string{"consistent-even", "uniform"}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

func (p *parser) artifactFields(in *workflows.ExperimentInput, seen map[string]bool) {
	// Producers first: the Nexmark counts are per producer.
	if ips := in.Params["ProducerIPs"]; ips != "" && !seen["NumProducers"] {
		in.Producer.Producers = len(strings.Split(ips, ","))
	}
	hosts := p.hosts(in.Params)
	p.placement(in, hosts)
	p.nexmarkSources(in, seen)
}

// hosts validates the host lists and returns the distinct hosts they name.
func (p *parser) hosts(params map[string]string) []string {
	var out []string
	for _, f := range hostFields {
		v, ok := params[f]
		if !ok {
			continue
		}
		for i, h := range strings.Split(v, ",") {
			if net.ParseIP(h) == nil && !hostName.MatchString(h) {
				p.errorf("%s: entry %d %q is not an IP address or a host name", where(f, ""), i, h)
				continue
			}
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// placement checks InitialCustomTaskPlacement against the query's
// operators (or their artifact names, config_names.go) and the listed
// hosts and stores it as "op=host,…". The artifact lists an operator once
// per task, task i on the i-th entry's host; an entry naming an operator
// that koala's query folds into another is noted and dropped.
func (p *parser) placement(in *workflows.ExperimentInput, hosts []string) {
	const f = "InitialCustomTaskPlacement"
	v, ok := in.Params[f]
	if !ok {
		return
	}
	at := where(f, "")
	ops := operatorNames(in.QueryName)
	if ops == nil && in.QueryName != "" {
		_, err := queries.Operators(in.QueryName, nil)
		p.errorf("%s: cannot check the operators: %v", at, err)
	}
	var norm, folded []string
	for i, entry := range strings.Split(v, ",") {
		op, host, found := strings.Cut(entry, ":")
		op, host = strings.TrimSpace(op), strings.TrimSpace(host)
		if !found || op == "" || host == "" {
			p.errorf("%s: entry %d %q: want \"operator: host\"", at, i, entry)
			continue
		}
		if ops != nil {
			target, known := resolveOperator(in.QueryName, op)
			switch {
			case !known:
				p.errorf("%s: entry %d names operator %q, which query %q does not have (operators: %s%s)", at, i, op, in.QueryName, strings.Join(ops, ", "), aliasList(in.QueryName))
				continue
			case target == "":
				if !slices.Contains(folded, op) {
					folded = append(folded, op)
				}
				continue
			}
			op = target
		}
		switch {
		case len(hosts) > 0 && !slices.Contains(hosts, host):
			p.errorf("%s: entry %d places %q on %q, which no host list names (hosts: %s)", at, i, op, host, strings.Join(hosts, ", "))
			continue
		case net.ParseIP(host) == nil && !hostName.MatchString(host):
			p.errorf("%s: entry %d: %q is not an IP address or a host name", at, i, host)
			continue
		}
		norm = append(norm, op+"="+host)
	}
	if len(folded) > 0 {
		p.notef("%s: %s: the artifact's operators that koala's query %q folds into others; their entries are not used", at, strings.Join(folded, ", "), in.QueryName)
	}
	in.Params[f] = strings.Join(norm, ",")
}
