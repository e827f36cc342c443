package traces_test

import (
	"testing"

	"koala/dataplane"
	"koala/queries/traces"
	"koala/workflows/wftest"
)

// TestExactnessMatrix rescales each trace query's operator (the one its
// lazy rescale test scales) 2→4 and back while input flows, under every
// protocol, and checks the sink ledger and the output against the query's
// oracle.
func TestExactnessMatrix(t *testing.T) {
	skipShort(t)
	const n = 4000
	azureRecs, readings := azureInput(t, n)
	borgRecs, events := borgInput(t, n)
	taxiRecs, trips := taxiInput(t, n)
	twitchRecs, views := twitchInput(t, n)
	wftest.RunMatrix(t, []wftest.MatrixCase{
		matrixCase(t, traces.Azure, azureRescale, azureRecs, func(t *testing.T, res wftest.Result) { compare(t, res, azureOracle(readings)) }),
		matrixCase(t, traces.Borg, borgRescale, borgRecs, func(t *testing.T, res wftest.Result) { compare(t, res, borgOracle(events)) }),
		matrixCase(t, traces.Taxi, taxiRescale, taxiRecs, func(t *testing.T, res wftest.Result) { compare(t, res, taxiOracle(t, trips)) }),
		matrixCase(t, traces.Twitch, twitchRescale, twitchRecs, func(t *testing.T, res wftest.Result) { checkTwitch(t, res, views) }),
	})
}

// matrixCase is the matrix case of trace query q (its record-sink variant,
// judged by the ledger like q): rs.op scaled 2→4→2 over in, the output
// judged by check.
func matrixCase(t *testing.T, q string, rs rescale, in []dataplane.Record, check func(*testing.T, wftest.Result)) wftest.MatrixCase {
	return wftest.MatrixCase{
		Query: recordQuery(t, q), Operator: rs.op, From: 2, To: 4, Parallelism: rs.par, Input: in,
		Check: func(t *testing.T, _ *wftest.Run, res wftest.Result) { check(t, res) },
	}
}
