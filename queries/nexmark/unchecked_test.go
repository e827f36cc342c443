package nexmark

import (
	"testing"

	"koala/queries"
)

// TestLedgerCheckedQueries: only q1 passes each input record to the sink
// once, so only q1 runs are checked by the sink ledger; every other query
// says why not.
func TestLedgerCheckedQueries(t *testing.T) {
	for _, q := range queryNames {
		for _, name := range []string{"nexmark-" + q, ArtifactName(q)} {
			got := queries.Unchecked(name)
			if q == "q1" && got != "" {
				t.Errorf("%s: unchecked (%q), want checked by the sink ledger", name, got)
			}
			if q != "q1" && got == "" {
				t.Errorf("%s: claims the sink ledger checks it, but it filters, joins or aggregates", name)
			}
		}
	}
}
