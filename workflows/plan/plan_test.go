package plan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"koala/dataplane/control"
)

func helloJob(numBuckets, mapperP int) control.JobSpec {
	return control.JobSpec{
		JobID:      "job-1",
		Experiment: "hello",
		Query:      "hello",
		NumBuckets: numBuckets,
		Params:     map[string]string{"k": "v"},
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: "kafka-source", Parallelism: 1},
			{Name: "mapper", Kind: "map-upper", Parallelism: mapperP, Inputs: []string{"source"}, Keyed: true, Stateful: true},
			{Name: "sink", Kind: "count-sink", Parallelism: 1, Inputs: []string{"mapper"}},
		},
	}
}

func workers(ids ...string) []control.WorkerInfo {
	var out []control.WorkerInfo
	for _, id := range ids {
		out = append(out, control.WorkerInfo{ID: id, DataAddr: id + ":7000", Slots: 8})
	}
	return out
}

func mustInitial(t *testing.T, job control.JobSpec, ws []control.WorkerInfo) control.Deployment {
	t.Helper()
	d, err := Initial(job, ws)
	if err != nil {
		t.Fatalf("Initial: %v", err)
	}
	return d
}

// deepCopy round-trips through JSON so mutations of the original are visible.
func deepCopy(t *testing.T, d control.Deployment) control.Deployment {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out control.Deployment
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInitialPlacementAndRouting(t *testing.T) {
	job := helloJob(128, 2)
	d := mustInitial(t, job, workers("w2", "w1")) // unsorted on purpose
	if err := Validate(d); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if d.Epoch != 1 {
		t.Errorf("Epoch = %d, want 1", d.Epoch)
	}
	want := []control.TaskRef{
		{ID: "source-0", Operator: "source", Index: 0, WorkerID: "w1", DataAddr: "w1:7000"},
		{ID: "mapper-0", Operator: "mapper", Index: 0, WorkerID: "w2", DataAddr: "w2:7000"},
		{ID: "mapper-1", Operator: "mapper", Index: 1, WorkerID: "w1", DataAddr: "w1:7000"},
		{ID: "sink-0", Operator: "sink", Index: 0, WorkerID: "w2", DataAddr: "w2:7000"},
	}
	if !reflect.DeepEqual(d.Tasks, want) {
		t.Errorf("Tasks =\n%+v\nwant\n%+v", d.Tasks, want)
	}
	if len(d.Routing) != 3 {
		t.Fatalf("%d routing tables, want 3 (one per operator)", len(d.Routing))
	}
	for _, rt := range d.Routing {
		if rt.Epoch != 1 || len(rt.Buckets) != 128 {
			t.Errorf("table %s: epoch %d, %d buckets", rt.Operator, rt.Epoch, len(rt.Buckets))
		}
	}
	rt, _ := d.Table("mapper")
	for b, task := range rt.Buckets {
		if want := b / 64; task != want {
			t.Fatalf("mapper bucket %d → %d, want %d", b, task, want)
		}
	}
	// Uneven split: 3 tasks over 10 buckets, contiguous and floor/ceil.
	if got, want := EvenBuckets(10, 3), []int{0, 0, 0, 0, 1, 1, 1, 2, 2, 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("EvenBuckets(10,3) = %v, want %v", got, want)
	}
	// The job is copied, not aliased.
	job.Operators[1].Parallelism = 99
	job.Params["k"] = "changed"
	if d.Job.Operators[1].Parallelism != 2 || d.Job.Params["k"] != "v" {
		t.Errorf("deployment aliases the job spec")
	}
}

func TestInitialErrors(t *testing.T) {
	base := func(mut func(*control.JobSpec)) control.JobSpec {
		j := helloJob(128, 1)
		mut(&j)
		return j
	}
	tests := []struct {
		name    string
		job     control.JobSpec
		workers []control.WorkerInfo
		want    string
	}{
		{"unknown placement", base(func(j *control.JobSpec) { j.Params = map[string]string{control.ParamTaskPlacement: "packed"} }), workers("w1"), `param TaskPlacement "packed": allowed round-robin, co-locate`},
		{"zero buckets", base(func(j *control.JobSpec) { j.NumBuckets = 0 }), workers("w1"), "NumBuckets 0: must be between 1 and 65536"},
		{"no operators", base(func(j *control.JobSpec) { j.Operators = nil }), workers("w1"), `job "job-1" has no operators`},
		{"duplicate name", base(func(j *control.JobSpec) { j.Operators[2].Name = "mapper" }), workers("w1"), `operator name "mapper" is used twice`},
		{"empty name", base(func(j *control.JobSpec) { j.Operators[1].Name = "" }), workers("w1"), "operator 1 has no name"},
		{"parallelism 0", base(func(j *control.JobSpec) { j.Operators[1].Parallelism = 0 }), workers("w1"), `parallelism 0 for operator "mapper": must be between 1 and NumBuckets (128)`},
		{"parallelism too big", base(func(j *control.JobSpec) { j.Operators[1].Parallelism = 129 }), workers("w1"), `parallelism 129 for operator "mapper": must be between 1 and NumBuckets (128)`},
		{"unknown input", base(func(j *control.JobSpec) { j.Operators[1].Inputs = []string{"srcx"} }), workers("w1"), `operator "mapper" reads from unknown operator "srcx" (operators: source, mapper, sink)`},
		{"later input", base(func(j *control.JobSpec) { j.Operators[1].Inputs = []string{"sink"} }), workers("w1"), `operator "mapper" reads from "sink", which is not an earlier operator`},
		{"no workers", helloJob(128, 1), nil, "no workers available"},
		{"duplicate worker", helloJob(128, 1), workers("w1", "w1"), `worker id "w1" is listed twice`},
		{"empty worker id", helloJob(128, 1), workers(""), "empty id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Initial(tc.job, tc.workers)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// minimalMoves computes, independently of the planner, the fewest buckets
// that must change owner to reach an even floor/ceil spread over p tasks.
func minimalMoves(buckets []int, p int) int {
	n := len(buckets)
	counts := map[int]int{}
	for _, t := range buckets {
		counts[t]++
	}
	var kept []int
	moved := 0
	for task, c := range counts {
		if task >= p {
			moved += c // removed task: everything goes
		} else {
			kept = append(kept, c)
		}
	}
	// The larger quotas are best spent on the fullest tasks.
	sort.Sort(sort.Reverse(sort.IntSlice(kept)))
	for i, c := range kept {
		quota := n / p
		if i < n%p {
			quota++
		}
		moved += max(0, c-quota)
	}
	return moved
}

// checkPlan asserts every invariant of a scale plan.
func checkPlan(t *testing.T, old control.Deployment, pl Plan, op string, p int) {
	t.Helper()
	if err := Validate(pl.New); err != nil {
		t.Fatalf("new deployment invalid: %v", err)
	}
	if !reflect.DeepEqual(pl.Old, old) {
		t.Fatalf("Plan.Old differs from the input deployment")
	}
	oldSpec, _ := old.Job.Operator(op)
	cur := oldSpec.Parallelism
	newSpec, _ := pl.New.Job.Operator(op)
	if newSpec.Parallelism != p {
		t.Fatalf("new parallelism %d, want %d", newSpec.Parallelism, p)
	}
	if pl.New.Epoch != old.Epoch+1 {
		t.Errorf("deployment epoch %d → %d, want +1", old.Epoch, pl.New.Epoch)
	}
	oldRT, _ := old.Table(op)
	newRT, _ := pl.New.Table(op)
	if newRT.Epoch != oldRT.Epoch+1 {
		t.Errorf("routing epoch %d → %d, want +1", oldRT.Epoch, newRT.Epoch)
	}
	for _, rt := range old.Routing {
		if rt.Operator == op {
			continue
		}
		nrt, _ := pl.New.Table(rt.Operator)
		if !reflect.DeepEqual(rt, nrt) {
			t.Errorf("routing table of untouched operator %s changed", rt.Operator)
		}
	}
	// Every bucket on an existing task, spread within one.
	n := old.Job.NumBuckets
	counts := make([]int, p)
	for b, task := range newRT.Buckets {
		if task < 0 || task >= p {
			t.Fatalf("bucket %d → task %d, want 0..%d", b, task, p-1)
		}
		counts[task]++
	}
	if lo, hi := slices.Min(counts), slices.Max(counts); hi-lo > 1 {
		t.Errorf("spread %d..%d (counts %v), want max-min ≤ 1", lo, hi, counts)
	}
	if want := minimalMoves(oldRT.Buckets, p); len(pl.Moves) != want {
		t.Errorf("%d moves, minimal is %d", len(pl.Moves), want)
	}
	// Moves match the table diff exactly, sorted by bucket.
	var diff []BucketMove
	for b := 0; b < n; b++ {
		if oldRT.Buckets[b] != newRT.Buckets[b] {
			diff = append(diff, BucketMove{Bucket: b, From: control.TaskID(op, oldRT.Buckets[b]), To: control.TaskID(op, newRT.Buckets[b])})
		}
	}
	if !reflect.DeepEqual(pl.Moves, diff) {
		t.Errorf("Moves =\n%v\nwant table diff\n%v", pl.Moves, diff)
	}
	// MovesByPair regroups Moves, sorted by (from index, to index), buckets ascending.
	var regrouped []BucketMove
	for i, pm := range pl.MovesByPair {
		if len(pm.Buckets) == 0 || !slices.IsSorted(pm.Buckets) {
			t.Errorf("pair %v: buckets empty or unsorted", pm)
		}
		if i > 0 {
			prev := pl.MovesByPair[i-1]
			if c := compareIdx(prev.From, pm.From); c > 0 || (c == 0 && compareIdx(prev.To, pm.To) >= 0) {
				t.Errorf("MovesByPair not sorted at %d: %v then %v", i, prev, pm)
			}
		}
		for _, b := range pm.Buckets {
			regrouped = append(regrouped, BucketMove{Bucket: b, From: pm.From, To: pm.To})
		}
	}
	slices.SortFunc(regrouped, func(a, b BucketMove) int { return a.Bucket - b.Bucket })
	if !reflect.DeepEqual(regrouped, nilIfEmpty(pl.Moves)) {
		t.Errorf("MovesByPair does not regroup Moves")
	}
	// Added and removed tasks.
	var wantAdded, wantRemoved []string
	for i := cur; i < p; i++ {
		wantAdded = append(wantAdded, control.TaskID(op, i))
	}
	for i := p; i < cur; i++ {
		wantRemoved = append(wantRemoved, control.TaskID(op, i))
	}
	if got := ids(pl.AddedTasks); !reflect.DeepEqual(got, wantAdded) {
		t.Errorf("added %v, want %v", got, wantAdded)
	}
	if got := ids(pl.RemovedTasks); !reflect.DeepEqual(got, wantRemoved) {
		t.Errorf("removed %v, want %v", got, wantRemoved)
	}
	for _, rt := range pl.RemovedTasks {
		if !slices.Contains(old.Tasks, rt) {
			t.Errorf("removed task %v is not an old task", rt)
		}
	}
	// Untouched tasks keep their placement.
	for _, ot := range old.Tasks {
		if ot.Operator == op && ot.Index >= p {
			continue
		}
		if !slices.Contains(pl.New.Tasks, ot) {
			t.Errorf("task %s changed placement", ot.ID)
		}
	}
}

func compareIdx(a, b string) int {
	ia, _ := indexOf(a)
	ib, _ := indexOf(b)
	return ia - ib
}

func indexOf(id string) (int, error) {
	var i int
	_, err := fmt.Sscanf(id[strings.LastIndexByte(id, '-')+1:], "%d", &i)
	return i, err
}

func nilIfEmpty(m []BucketMove) []BucketMove {
	if len(m) == 0 {
		return nil
	}
	return m
}

func ids(ts []control.TaskRef) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func TestScaleTable(t *testing.T) {
	tests := []struct {
		from, to  int
		wantMoves int
	}{
		{1, 2, 64},
		{2, 4, 64},
		{4, 2, 64},
		{3, 5, 50}, // 43,43,42 → quotas 26,26,26,25,25: 17+17+16
		{1, 128, 127},
		{2, 1, 64},
		{5, 3, 0}, // filled in from minimalMoves below
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d-to-%d", tc.from, tc.to), func(t *testing.T) {
			old := mustInitial(t, helloJob(128, tc.from), workers("w1", "w2", "w3"))
			before := deepCopy(t, old)
			pl, err := Scale(old, "mapper", tc.to, workers("w1", "w2", "w3"))
			if err != nil {
				t.Fatalf("Scale: %v", err)
			}
			checkPlan(t, before, pl, "mapper", tc.to)
			if !reflect.DeepEqual(deepCopy(t, old), before) {
				t.Errorf("Scale mutated its input")
			}
			oldRT, _ := old.Table("mapper")
			want := tc.wantMoves
			if want == 0 {
				want = minimalMoves(oldRT.Buckets, tc.to)
			}
			if len(pl.Moves) != want {
				t.Errorf("%d moves, want %d", len(pl.Moves), want)
			}
		})
	}
}

func TestScaleContiguousPairs(t *testing.T) {
	old := mustInitial(t, helloJob(128, 2), workers("w1"))
	pl, err := Scale(old, "mapper", 4, workers("w1"))
	if err != nil {
		t.Fatal(err)
	}
	rng := func(lo, hi int) []int {
		var out []int
		for b := lo; b < hi; b++ {
			out = append(out, b)
		}
		return out
	}
	want := []PairMoves{
		{From: "mapper-0", To: "mapper-2", Buckets: rng(32, 64)},
		{From: "mapper-1", To: "mapper-3", Buckets: rng(96, 128)},
	}
	if !reflect.DeepEqual(pl.MovesByPair, want) {
		t.Errorf("MovesByPair = %+v, want %+v", pl.MovesByPair, want)
	}
	// Scaling 1 → 2 from the initial layout reproduces the initial layout of 2.
	one := mustInitial(t, helloJob(128, 1), workers("w1"))
	pl, err = Scale(one, "mapper", 2, workers("w1"))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := pl.New.Table("mapper")
	if !reflect.DeepEqual(rt.Buckets, EvenBuckets(128, 2)) {
		t.Errorf("1→2 buckets %v, want the even contiguous layout", rt.Buckets)
	}
}

func TestScalePlacement(t *testing.T) {
	old := mustInitial(t, helloJob(128, 1), workers("w1", "w2", "w3"))
	// source-0 w1, mapper-0 w2, sink-0 w3: all loads equal, ties by id.
	pl, err := Scale(old, "mapper", 3, workers("w3", "w2", "w1"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range pl.AddedTasks {
		got[a.ID] = a.WorkerID + "@" + a.DataAddr
	}
	want := map[string]string{"mapper-1": "w1@w1:7000", "mapper-2": "w2@w2:7000"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("placement %v, want %v", got, want)
	}
	// A fresh worker takes new tasks first.
	pl, err = Scale(old, "mapper", 3, workers("w1", "w2", "w3", "w4"))
	if err != nil {
		t.Fatal(err)
	}
	if w := pl.AddedTasks[0].WorkerID; w != "w4" {
		t.Errorf("mapper-1 on %s, want the empty worker w4", w)
	}
	// Scale-in needs no workers.
	two := pl.New
	pl, err = Scale(two, "mapper", 1, nil)
	if err != nil {
		t.Fatalf("scale-in without workers: %v", err)
	}
	if len(pl.RemovedTasks) != 2 || len(pl.New.Tasks) != 3 {
		t.Errorf("removed %v, tasks now %v", pl.RemovedTasks, pl.New.Tasks)
	}
}

func TestScaleErrors(t *testing.T) {
	old := mustInitial(t, helloJob(128, 2), workers("w1"))
	broken := deepCopy(t, old)
	broken.Routing[1].Buckets[5] = 7
	tests := []struct {
		name    string
		d       control.Deployment
		op      string
		p       int
		workers []control.WorkerInfo
		want    string
	}{
		{"unknown operator", old, "mapperx", 3, workers("w1"), `operator "mapperx" not found (operators: source, mapper, sink)`},
		{"zero", old, "mapper", 0, workers("w1"), `target parallelism 0 for operator "mapper": must be between 1 and NumBuckets (128)`},
		{"too big", old, "mapper", 129, workers("w1"), `target parallelism 129 for operator "mapper": must be between 1 and NumBuckets (128)`},
		{"same", old, "mapper", 2, workers("w1"), `operator "mapper" already has parallelism 2`},
		{"source", old, "source", 2, workers("w1"), `operator "source" is a source (kind "kafka-source")`},
		{"no workers", old, "mapper", 3, nil, `no workers available to place 1 new task(s) of operator "mapper"`},
		{"broken table", broken, "mapper", 3, workers("w1"), `routing table of operator "mapper": bucket 5 → task 7, but tasks are 0..1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Scale(tc.d, tc.op, tc.p, tc.workers)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestScaleRandomSequences(t *testing.T) {
	for seed := uint64(1); seed <= 120; seed++ {
		r := rand.New(rand.NewPCG(seed, 42))
		n := []int{1, 2, 7, 128, 1000}[r.IntN(5)]
		job := helloJob(n, 1+r.IntN(min(n, 8)))
		job.Operators = append(job.Operators, control.OperatorSpec{
			Name: "counter", Kind: "count", Parallelism: 1 + r.IntN(min(n, 4)), Inputs: []string{"mapper"}, Keyed: true,
		})
		ws := workers("a", "b", "c", "d", "e")[:1+r.IntN(5)]
		d, err := Initial(job, ws)
		if err != nil {
			t.Fatalf("seed %d: Initial: %v", seed, err)
		}
		for step := 0; step < 12; step++ {
			op := []string{"mapper", "counter", "sink"}[r.IntN(3)]
			spec, _ := d.Job.Operator(op)
			p := 1 + r.IntN(min(n, 40))
			if p == spec.Parallelism {
				if _, err := Scale(d, op, p, ws); err == nil {
					t.Fatalf("seed %d step %d: scaling %s to its own parallelism succeeded", seed, step, op)
				}
				continue
			}
			before := cloneDeployment(d) // TestScaleTable checks non-aliasing via JSON
			pl, err := Scale(d, op, p, ws)
			if err != nil {
				t.Fatalf("seed %d step %d: Scale(%s, %d→%d): %v", seed, step, op, spec.Parallelism, p, err)
			}
			checkPlan(t, before, pl, op, p)
			again, _ := Scale(before, op, p, ws)
			if !reflect.DeepEqual(again, pl) {
				t.Fatalf("seed %d step %d: Scale is not deterministic", seed, step)
			}
			if t.Failed() {
				t.Fatalf("seed %d step %d (%s %d→%d, n=%d)", seed, step, op, spec.Parallelism, p, n)
			}
			d = pl.New
		}
	}
}

// Co-locating places task i of every operator on worker i mod n, so a chain
// of equal parallelism stays on one worker per index.
func TestInitialColocated(t *testing.T) {
	job := helloJob(128, 2)
	job.Params = map[string]string{control.ParamTaskPlacement: PlacementColocate}
	d := mustInitial(t, job, workers("w2", "w1"))
	if err := Validate(d); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := map[string]string{"source-0": "w1", "mapper-0": "w1", "mapper-1": "w2", "sink-0": "w1"}
	for _, task := range d.Tasks {
		if task.WorkerID != want[task.ID] {
			t.Errorf("%s on %s, want %s", task.ID, task.WorkerID, want[task.ID])
		}
	}
	if len(d.Tasks) != len(want) {
		t.Errorf("%d tasks, want %d", len(d.Tasks), len(want))
	}
}
