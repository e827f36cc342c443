package experiments

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"koala/dataplane/control"
	"koala/queries"
	"koala/queries/nexmark"
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

// partitionPolicies are the PartitionPolicy values koala honours: keys hash
// to a fixed number of buckets, spread evenly and contiguously over the
// tasks, and a rescale moves the fewest buckets that keep the spread even.
var partitionPolicies = []string{"consistent-even"}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// nexmarkEventTypes are the accepted EventType values.
var nexmarkEventTypes = []string{"Person", "Auction", "Bid"}

// nexmarkKnobs are the fields of a NexmarkSourceConfig (and the top-level
// fields of the same name), with their minimum.
var nexmarkKnobs = map[string]int64{
	"NumActivePeople": 1, "HotSellersRatio": 1, "HotAuctionsRatio": 1, "HotBiddersRatio": 1,
	"NumEvents": 0, "OutputEventNumber": 0,
}

func (p *parser) artifactFields(in *workflows.ExperimentInput, seen map[string]bool) {
	hosts := p.hosts(in.Params)
	p.placement(in, hosts)
	p.nexmarkSources(in, seen)
	if ips := in.Params["ProducerIPs"]; ips != "" && !seen["NumProducers"] {
		in.Producer.Producers = len(strings.Split(ips, ","))
	}
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
// operators and the listed hosts and stores it as "op=host,…".
func (p *parser) placement(in *workflows.ExperimentInput, hosts []string) {
	const f = "InitialCustomTaskPlacement"
	v, ok := in.Params[f]
	if !ok {
		return
	}
	at := where(f, "")
	var ops []string
	if specs, err := queries.Operators(in.QueryName, nil); err == nil {
		for _, op := range specs {
			ops = append(ops, op.Name)
		}
	} else if in.QueryName != "" {
		p.errorf("%s: cannot check the operators: %v", at, err)
	}
	placed := map[string]string{}
	var norm []string
	for i, entry := range strings.Split(v, ",") {
		op, host, found := strings.Cut(entry, ":")
		op, host = strings.TrimSpace(op), strings.TrimSpace(host)
		switch {
		case !found || op == "" || host == "":
			p.errorf("%s: entry %d %q: want \"operator: host\"", at, i, entry)
			continue
		case ops != nil && !slices.Contains(ops, op):
			p.errorf("%s: entry %d names operator %q, which query %q does not have (operators: %s)", at, i, op, in.QueryName, strings.Join(ops, ", "))
			continue
		case len(hosts) > 0 && !slices.Contains(hosts, host):
			p.errorf("%s: entry %d places %q on %q, which no host list names (hosts: %s)", at, i, op, host, strings.Join(hosts, ", "))
			continue
		case net.ParseIP(host) == nil && !hostName.MatchString(host):
			p.errorf("%s: entry %d: %q is not an IP address or a host name", at, i, host)
			continue
		}
		if prev, dup := placed[op]; dup {
			p.errorf("%s: operator %q is placed twice (%s and %s)", at, op, prev, host)
			continue
		}
		placed[op] = host
		norm = append(norm, op+"="+host)
	}
	in.Params[f] = strings.Join(norm, ",")
}

// nexmarkSources turns NexmarkLogicalSourceConfigs and the top-level
// Nexmark knobs into the producer's generator configuration.
func (p *parser) nexmarkSources(in *workflows.ExperimentInput, seen map[string]bool) {
	var src control.NexmarkSource
	var numEvents int64
	set := func(name string, v int64) {
		switch name {
		case "NumActivePeople":
			src.NumActivePeople = int(v)
		case "HotSellersRatio":
			src.HotSellersRatio = int(v)
		case "HotAuctionsRatio":
			src.HotAuctionsRatio = int(v)
		case "HotBiddersRatio":
			src.HotBiddersRatio = int(v)
		case "NumEvents":
			numEvents = v
		case "OutputEventNumber":
			src.OutputEventNumber = v
		}
	}
	topLevel := false
	for _, name := range sortedKeys(nexmarkKnobs) {
		if v, ok := in.Params[name]; ok {
			n, _ := strconv.ParseInt(v, 10, 64) // validated as a knob
			set(name, n)
			topLevel = true
		}
	}
	if v := in.Params["NexmarkSellers"]; v != "" {
		src.Sellers = v
		topLevel = true
	}
	const f = "NexmarkLogicalSourceConfigs"
	raw, ok := in.Params[f]
	if !ok && !(topLevel && in.Producer.Generator == nexmark.GeneratorName) {
		return // the knobs are kept in Params for generators that read them
	}
	if ok {
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(raw), &items); err != nil {
			p.errorf("%s: expected an array of objects, got %s", where(f, ""), kindOf([]byte(raw)))
			return
		}
		if len(items) == 0 {
			p.errorf("%s: must name at least one event type", where(f, ""))
		}
		fromSource := map[string]int64{} // knob → value set by a source config
		for i, item := range items {
			p.logicalSource(fmt.Sprintf("%s[%d]", f, i), item, &src, fromSource, set)
		}
	}
	switch {
	case seen["Generator"] && in.Producer.Generator != nexmark.GeneratorName:
		p.errorf("%s: %q, but the Nexmark fields (%s) need generator %q", where("Generator", ""), in.Producer.Generator, f, nexmark.GeneratorName)
		return
	case src.Sellers != "" && len(src.EventTypes) > 0:
		p.errorf("%s: %q makes its own auction/bid stream; %s cannot select event types from it", where("NexmarkSellers", ""), src.Sellers, f)
		return
	case numEvents > 0 && numEvents < int64(in.Producer.Producers):
		p.errorf("%s: %d is fewer than the %d producers", where("NumEvents", ""), numEvents, in.Producer.Producers)
	}
	in.Producer.Generator = nexmark.GeneratorName
	in.Producer.MaxEvents = numEvents
	in.Producer.Nexmark = &src
}

// logicalSource parses one entry of NexmarkLogicalSourceConfigs: its event
// type joins src.EventTypes, its NexmarkSourceConfig knobs are set (they
// must agree between entries: the producers generate one stream).
func (p *parser) logicalSource(loc string, item json.RawMessage, src *control.NexmarkSource, fromSource map[string]int64, set func(string, int64)) {
	if k := kindOf(item); k != "object" {
		p.errorf("%s: expected an object, got %s", loc, k)
		return
	}
	members, err := objectMembers(item)
	if err != nil {
		p.errorf("%s: %v", loc, err)
		return
	}
	gotType := false
	for _, m := range members {
		at := where(m.name, loc)
		switch m.name {
		case "EventType":
			var typ string
			if !p.enumTo(&typ, m.raw, at, nexmarkEventTypes) {
				continue
			}
			gotType = true
			if slices.Contains(src.EventTypes, typ) {
				p.errorf("%s: event type %q is listed twice", at, typ)
				continue
			}
			src.EventTypes = append(src.EventTypes, typ)
		case "NexmarkSourceConfig":
			if k := kindOf(m.raw); k != "object" {
				p.errorf("%s: expected an object, got %s", at, k)
				continue
			}
			knobs, err := objectMembers(m.raw)
			if err != nil {
				p.errorf("%s: %v", at, err)
				continue
			}
			for _, kn := range knobs {
				kat := where(kn.name, loc+".NexmarkSourceConfig")
				lo, known := nexmarkKnobs[kn.name]
				if !known {
					p.errorf("unknown field %q in %s.NexmarkSourceConfig (allowed: %s)", kn.name, loc, strings.Join(sortedKeys(nexmarkKnobs), ", "))
					continue
				}
				v, ok := p.integer(kn.raw, kat, lo, math.MaxInt64)
				if !ok {
					continue
				}
				if prev, dup := fromSource[kn.name]; dup && prev != v {
					p.errorf("%s: %d differs from %d given for another event type (the producers generate one Nexmark stream)", kat, v, prev)
					continue
				}
				fromSource[kn.name] = v
				set(kn.name, v)
			}
		default:
			p.errorf("unknown field %q in %s (allowed: EventType, NexmarkSourceConfig)", m.name, loc)
		}
	}
	if !gotType && !slices.ContainsFunc(members, func(m member) bool { return m.name == "EventType" }) {
		p.errorf("%s: missing required field \"EventType\" (one of %s)", loc, strings.Join(nexmarkEventTypes, ", "))
	}
}
