package experiments

import (
	"fmt"
	"slices"
	"strings"

	"koala/queries"
	"koala/workflows"
)

// Artifact query and operator names
//
// The artifact's configs name queries and operators as its own dataflows
// do (user/user.go and query/… in the artifact). Where koala registers the
// same dataflow under another name, the config's names are translated
// here, when the config is parsed, so that everything after the parser
// (the workflow, the plan, the figures) sees koala's names only:
//
//   - a QueryName koala does not register but the artifact uses maps to
//     the registered query that is the same dataflow (artifactQueries);
//   - an operator name in "<Op>Parallelism", InitialCustomTaskPlacement or
//     a reconfiguration's TargetOperator that the query does not have maps
//     through the query's alias table (artifactOperators). Aliases match
//     ignoring case and hyphens, because the artifact spells one operator
//     differently in its parallelism field and its operator name
//     ("LoyaltyTrendAnalyzerParallelism" sets "loyalty-Trend-Analyzer").
//
// An alias to "" is an operator of the artifact's dataflow that koala's
// query folds into another one (q5's HottestItem, q7's highestBid, taxi's
// top10Route): its parallelism and placements are accepted and noted, and
// reconfiguring it is an error.

// artifactQuery is an artifact query name koala runs as another query.
type artifactQuery struct {
	target string
	// warmUp: the artifact's variant of the dataflow that only builds
	// warm-up state (its *_warmup dataflows fill the same operators'
	// state), run here as the target with IsWarmUp.
	warmUp bool
	// closing: the artifact feeds the query ClosedAuction events, and the
	// target closes auctions itself, so a ClosedAuction source becomes
	// koala's closing-auction stream (config_nexmark.go).
	closing bool
	why     string
}

var artifactQueries = map[string]artifactQuery{
	"nexmark_query4_modified": {target: "nexmark_query4", closing: true, why: "the artifact's q4 variant that averages closed auctions per category in its statefulMapper; koala's q4 closes the auctions itself (q4-close) and averages them in q4-average"},
	"nexmark_query3_warmup":   {target: "nexmark_query3", warmUp: true, why: "the artifact's q3 dataflow that only fills the join's person state"},
	"azure_warmup":            {target: "azure", warmUp: true, why: "the artifact's azure dataflow that only fills cpuReadingStats' lists"},
	"borg_warmup":             {target: "borg", warmUp: true, why: "the artifact's borg dataflow that only fills jobEventStats' lists"},
	"taxi_warmup":             {target: "taxi", warmUp: true, why: "the artifact's taxi dataflow that only fills movingMedianTripTime's lists"},
	"taxi_skew":               {target: "taxi", why: "the taxi dataflow of the artifact's skew-mitigation experiment (a rebalance under a skewed key stream)"},
}

// artifactOperators maps, per registered query, the artifact's operator
// names (normalised by aliasKey) to the query's operator ("" when the query
// has no counterpart).
var artifactOperators = map[string]map[string]string{
	"nexmark_query2": {"filter": "q2-filter"},
	"nexmark_query3": {"personsource": "source", "auctionsource": "source", "personfilter": "q3-persons", "auctionfilter": "q3-auctions", "join": "q3-join"},
	"nexmark_query4": {"auctionsource": "source", "bidsource": "source", "closedauction": "q4-close", "statefulmapper": "q4-average"},
	"nexmark_query5": {"slidingwindow": "q5-window", "hottestitem": ""},
	"nexmark_query6": {"auctionsource": "source", "bidsource": "source", "closedauction": "q6-close", "statefulmapper": "q6-average"},
	"nexmark_query7": {"tumblingwindow": "q7-window", "highestbid": ""},
	"nexmark_query8": {"personsource": "source", "auctionsource": "source", "windowjoin": "q8-join", "customwindowjoin": "q8-join"},
	"taxi":           {"top10route": ""},
	"twitch": {"twitchfilesource": "source", "retentionanalyzer": "userSessions", "viewerloyaltycalculator": "streamViewers",
		"loyaltytrendanalyzer": "streamSummary"},
}

func aliasKey(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", ""))
}

// operatorNames lists query's operators (nil when it is not registered).
func operatorNames(query string) []string {
	q, ok := queries.Lookup(query)
	if !ok {
		return nil
	}
	names := make([]string, 0, len(q.Operators))
	for _, op := range q.Operators {
		names = append(names, op.Name)
	}
	return names
}

// resolveOperator returns the operator of query that name (an operator
// name or an artifact alias) means. known is false for a name that is
// neither; target "" with known true is an artifact operator the query
// folds into another.
func resolveOperator(query, name string) (target string, known bool) {
	if slices.Contains(operatorNames(query), name) {
		return name, true
	}
	target, known = artifactOperators[query][aliasKey(name)]
	return target, known
}

// aliasList renders query's artifact aliases for error messages.
func aliasList(query string) string {
	var out []string
	for _, k := range sortedKeys(artifactOperators[query]) {
		t := artifactOperators[query][k]
		if t == "" {
			t = "none"
		}
		out = append(out, k+"→"+t)
	}
	if len(out) == 0 {
		return ""
	}
	return "; artifact names: " + strings.Join(out, ", ")
}

// resolveQueryName turns an artifact query name into the registered one.
func (p *parser) resolveQueryName(in *workflows.ExperimentInput, seen map[string]bool) {
	if _, ok := queries.Lookup(in.QueryName); ok || in.QueryName == "" {
		return
	}
	a, ok := artifactQueries[in.QueryName]
	if !ok {
		return // CheckQuery names the known queries
	}
	if _, ok := queries.Lookup(a.target); !ok {
		return // the target's package is not linked in; CheckQuery reports it
	}
	from := in.QueryName
	in.QueryName = a.target
	in.Params[ParamArtifactQueryName] = from
	if !a.warmUp {
		p.notef("%s: %q runs as query %q (%s)", where("QueryName", ""), from, a.target, a.why)
		return
	}
	switch {
	case !seen["IsWarmUp"]:
		in.Params["IsWarmUp"] = "true"
	case in.Params["IsWarmUp"] != "true":
		p.errorf("%s: %q is the artifact's warm-up dataflow, but IsWarmUp is false (allowed: true, or leave IsWarmUp out; for a measurement run name the query %q)", where("QueryName", ""), from, a.target)
		return
	}
	p.notef("%s: %q runs as query %q building warm-up state (%s)", where("QueryName", ""), from, a.target, a.why)
}

// ParamArtifactQueryName keeps the artifact's QueryName of a config whose
// query runs under koala's name (results and figures may want it).
const ParamArtifactQueryName = "ArtifactQueryName"

// resolveParallelism renames the operators of "<Op>Parallelism" fields
// through the query's aliases; parallelismFrom (operator → field) follows.
func (p *parser) resolveParallelism(in *workflows.ExperimentInput, parallelismFrom map[string]string) {
	names := operatorNames(in.QueryName)
	if names == nil {
		return
	}
	for _, op := range sortedKeys(parallelismFrom) {
		field := parallelismFrom[op]
		target, known := resolveOperator(in.QueryName, op)
		if !known || target == op {
			continue // unknown names are CheckQuery's to report
		}
		v := in.Parallelism[op]
		delete(in.Parallelism, op)
		delete(parallelismFrom, op)
		if target == "" {
			p.notef("%s: the artifact's operator %q is folded into another operator of query %q here; its parallelism %d is not used", where(field, ""), op, in.QueryName, v)
			continue
		}
		if prev, dup := parallelismFrom[target]; dup {
			if in.Parallelism[target] != v {
				p.errorf("%s sets operator %q to %d and %q sets it to %d (both name operator %q of query %q; allowed: equal values)", where(field, ""), op, v, prev, in.Parallelism[target], target, in.QueryName)
			}
			continue
		}
		in.Parallelism[target] = v
		parallelismFrom[target] = field
	}
}

// resolveReconfigTargets renames reconfiguration targets through the
// query's aliases.
func (p *parser) resolveReconfigTargets(query string, reconfigs []workflows.ReconfigSpec, meta []entryMeta) {
	if operatorNames(query) == nil {
		return
	}
	for i := range reconfigs {
		op := reconfigs[i].TargetOperator
		target, known := resolveOperator(query, op)
		switch {
		case !known || target == op:
		case target == "":
			p.errorf("%s: the artifact's operator %q is folded into another operator of query %q here and cannot be reconfigured on its own (operators: %s)",
				where("TargetOperator", fmt.Sprintf("Reconfigurations[%d]", meta[i].index)), op, query, strings.Join(operatorNames(query), ", "))
		default:
			reconfigs[i].TargetOperator = target
		}
	}
}
