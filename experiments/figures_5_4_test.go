package experiments

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/workflows"
)

// run54 is a fakeRun with an experiment input: a warm-up load of
// stateBytes, or a generator with numKeys keys and a Zipf exponent.
func run54(exp, kw, gen string, numKeys int, skew float64, stateBytes uint64) RunData {
	r := fakeRun(exp, kw, scaleTo(4))
	in := workflows.ExperimentInput{QueryName: "counter", Params: map[string]string{}}
	in.Producer.Generator, in.Producer.NumKeys, in.Producer.Skew = gen, numKeys, skew
	if stateBytes > 0 {
		in.Params[control.ParamLoadWarmUpData] = "true"
		r.StateBytes, r.StateKeys = stateBytes, stateBytes/32
	}
	r.Input = &in
	r.Lookup = secs(0, 2, 3)
	r.KLTSize = secs(float64(numKeys)/2, float64(numKeys)/4)
	r.KLTBytes = secs(float64(numKeys)*10, 0)
	return r
}

func TestFig54_Shaping(t *testing.T) {
	warm := run54("state", "s1", produce.SequentialGenerator, 1000, 0, 64e6)
	loc2 := run54("loc", "l2", "keys", 20000, 0, 0)
	loc1 := run54("loc", "l1", "keys", 10000, 0, 0)
	skew := run54("skew", "z1", produce.ZipfGenerator, 10000, 1.2, 0)
	skew2 := run54("skew", "z2", produce.ZipfGenerator, 10000, 0.8, 0)
	lone := run54("lone", "z3", produce.ZipfGenerator, 10000, 0.8, 0)
	runs := []RunData{warm, loc2, loc1, skew, skew2, lone}

	locality, sk := Fig16Split(runs)
	require.Equal(t, []string{"l2", "l1"}, []string{locality[0].Entry.Keyword, locality[1].Entry.Keyword})
	require.Len(t, sk, 2, "an experiment with one exponent sweeps nothing")
	require.Empty(t, fig14Groups(runs), "one warm-up size sweeps nothing")

	// Points are sorted by x whatever the suite order.
	s := XYPoints("migrated", locality, func(r RunData) (float64, bool) { return float64(r.Input.Producer.NumKeys), true }, migratedMB)
	require.Equal(t, []metrics.Point{{Sec: 10000, Value: 6}, {Sec: 20000, Value: 6}}, s.Points)

	require.Equal(t, 2e6, warm.KeySpace(), "loaded keys win over NumKeys")
	require.Equal(t, 20000.0, loc2.KeySpace())
	b, secs, ok := warm.Migration()
	require.True(t, ok)
	require.Equal(t, 6e6, b)
	require.Equal(t, 2.0, secs, "5 of the 6 MB moved in the first second: 90 % needs two")

	lines := Fig15Lines(warm)
	require.Equal(t, []metrics.Point{{Sec: 1, Value: 0.002}, {Sec: 2, Value: 0.003}}, lines[0].Points, "µs → ms, zero seconds dropped")

	rows := Fig54Rows(runs)
	require.Len(t, rows, 6)
	require.Contains(t, FormatFig54Rows(rows), "| s1 | 64.0 MB | 2000000 | 1000 | 0 | 100 | 100 | 6.0 MB | 2, 2 | 2.5 | 1500 | 500 |")
}

func TestWriteSuiteFigures_54Files(t *testing.T) {
	runs := []RunData{
		run54("state", "s1", produce.SequentialGenerator, 1000, 0, 64e6),
		run54("state", "s2", produce.SequentialGenerator, 1000, 0, 128e6),
		run54("loc", "l1", "keys", 10000, 0, 0),
		run54("loc", "l2", "keys", 20000, 0, 0),
		run54("skew", "z1", produce.ZipfGenerator, 10000, 1.2, 0),
		run54("skew", "z2", produce.ZipfGenerator, 10000, 0.6, 0),
	}
	dir := t.TempDir()
	paths, _, err := WriteSuiteFigures(dir, runs, []string{"14", "15", "16"})
	require.NoError(t, err)
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
		require.FileExists(t, p)
	}
	require.ElementsMatch(t, []string{
		"fig14_state_throughput.png", "fig14_state_migrated.png", "fig14_state_migrated_vs_state.png",
		"fig15_s1_lookup_vs_batch.png", "fig15_s2_lookup_vs_batch.png", "fig15_klt_vs_keyspace.png",
		"fig16_locality_migrated.png", "fig16_locality_time.png", "fig16_skew_migrated.png", "fig16_skew_time.png",
	}, names)
}

// Nexmark q6* runs split like the key generators': uniform sellers over
// several active sets are locality runs, "zipf" sellers over several
// exponents skew runs.
func TestFig16Split_NexmarkSellers(t *testing.T) {
	q6 := func(kw, sellers string, numKeys int, skew float64) RunData {
		r := run54("x", kw, "nexmark", numKeys, skew, 0)
		r.Entry.Experiment = map[string]string{"uniform": "locality", "zipf": "skew"}[sellers]
		r.Input.QueryName = "nexmark_query6"
		r.Input.Producer.Nexmark = &control.NexmarkSource{Sellers: sellers, OutputEventNumber: 46 * 500000}
		return r
	}
	runs := []RunData{
		q6("l1", "uniform", 10000, 0), q6("l2", "uniform", 25000, 0),
		q6("z1", "zipf", 100000, 0.5), q6("z2", "zipf", 100000, 1.5),
	}
	locality, sk := Fig16Split(runs)
	var lk, sks []string
	for _, r := range locality {
		lk = append(lk, r.Entry.Keyword)
	}
	for _, r := range sk {
		sks = append(sks, r.Entry.Keyword)
	}
	require.ElementsMatch(t, []string{"l1", "l2"}, lk)
	require.ElementsMatch(t, []string{"z1", "z2"}, sks)
}

// q6* (closed-auction stream) runs sweep NumActivePeople, not NumKeys:
// they are locality runs over the active sellers, and the table's active
// keys column says so.
func TestFig16Split_ActivePeople(t *testing.T) {
	q6mod := func(kw string, active int) RunData {
		r := run54("q6mod_locality", kw, "nexmark", 1000, 0, 0)
		r.Input.QueryName = "nexmark_query6_modified"
		r.Input.Producer.Nexmark = &control.NexmarkSource{EventTypes: []string{"ClosedAuction"}, Sellers: "uniform", NumActivePeople: active}
		return r
	}
	runs := []RunData{q6mod("a50", 50000), q6mod("a25", 25000)}
	locality, sk := Fig16Split(runs)
	require.Len(t, locality, 2, "NumKeys is the same in both runs; the active sellers differ")
	require.Empty(t, sk)
	s := XYPoints("migrated", locality, func(r RunData) (float64, bool) { return float64(r.ActiveKeys()), true }, migratedMB)
	require.Equal(t, []float64{25000, 50000}, []float64{s.Points[0].Sec, s.Points[1].Sec})
	rows := Fig54Rows(runs)
	require.Equal(t, 50000, rows[0].ActiveKeys)
	require.Equal(t, 1000, run54("loc", "l1", "keys", 1000, 0, 0).ActiveKeys(), "without active people, NumKeys")
}
