package plan

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"testing"

	"koala/dataplane/control"
)

func mustScale(t *testing.T, numBuckets, from, to int) Plan {
	t.Helper()
	ws := workers("w1", "w2", "w3")
	p, err := Scale(mustInitial(t, helloJob(numBuckets, from), ws), "mapper", to, ws)
	if err != nil {
		t.Fatalf("Scale %d→%d: %v", from, to, err)
	}
	return p
}

func TestSubscales(t *testing.T) {
	for _, tc := range []struct {
		name              string
		buckets, from, to int
		n                 int
		wantK             int
		wantSizes         []int // pairs per subscale; nil = one each
	}{
		{name: "scale-out 2→4 one per pair", buckets: 64, from: 2, to: 4, wantK: 2},
		{name: "scale-in 4→2 one per pair", buckets: 64, from: 4, to: 2, wantK: 2},
		{name: "scale-in 4→3 one source, three pairs", buckets: 64, from: 4, to: 3, wantK: 3},
		{name: "scale-out 1→8", buckets: 64, from: 1, to: 8, wantK: 7},
		{name: "scale-out 1→8 merged into 3", buckets: 64, from: 1, to: 8, n: 3, wantK: 3, wantSizes: []int{3, 2, 2}},
		{name: "scale-out 1→8 merged into 1", buckets: 64, from: 1, to: 8, n: 1, wantK: 1, wantSizes: []int{7}},
		{name: "n larger than pairs", buckets: 64, from: 2, to: 4, n: 10, wantK: 2},
		{name: "uneven 3→7", buckets: 10, from: 3, to: 7, wantK: -1},
		{name: "uneven 7→3 merged into 2", buckets: 10, from: 7, to: 3, n: 2, wantK: 2},
		{name: "scale-in 8→1", buckets: 128, from: 8, to: 1, wantK: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustScale(t, tc.buckets, tc.from, tc.to)
			before := deepCopy(t, p.Old)
			beforeNew := deepCopy(t, p.New)
			groups := SubscaleGroups(p, tc.n)
			deps, err := Subscales(p, tc.n)
			if err != nil {
				t.Fatalf("Subscales: %v", err)
			}
			k := len(deps)
			if len(groups) != k {
				t.Fatalf("%d groups but %d deployments", len(groups), k)
			}
			if tc.wantK >= 0 && k != tc.wantK {
				t.Fatalf("%d subscales, want %d (pairs: %d)", k, tc.wantK, len(p.MovesByPair))
			}
			if tc.wantK < 0 && k != len(p.MovesByPair) {
				t.Fatalf("%d subscales, want one per pair (%d)", k, len(p.MovesByPair))
			}
			if tc.wantSizes != nil {
				var sizes []int
				for _, g := range groups {
					sizes = append(sizes, len(g))
				}
				if !slices.Equal(sizes, tc.wantSizes) {
					t.Fatalf("group sizes %v, want %v", sizes, tc.wantSizes)
				}
			}

			// The groups, in order, are exactly p.MovesByPair; their union is
			// p.Moves and every bucket moves once.
			var flat []PairMoves
			var moves []BucketMove
			for i, g := range groups {
				if len(g) == 0 {
					t.Fatalf("subscale %d is empty", i+1)
				}
				flat = append(flat, g...)
				for _, pm := range g {
					for _, b := range pm.Buckets {
						moves = append(moves, BucketMove{Bucket: b, From: pm.From, To: pm.To})
					}
				}
			}
			if !reflect.DeepEqual(flat, p.MovesByPair) {
				t.Fatalf("groups %v do not concatenate to MovesByPair %v", groups, p.MovesByPair)
			}
			slices.SortFunc(moves, func(a, b BucketMove) int { return cmp.Compare(a.Bucket, b.Bucket) })
			for i := 1; i < len(moves); i++ {
				if moves[i].Bucket == moves[i-1].Bucket {
					t.Fatalf("bucket %d moves twice", moves[i].Bucket)
				}
			}
			if !reflect.DeepEqual(moves, p.Moves) {
				t.Fatalf("union of subscale moves %v != plan moves %v", moves, p.Moves)
			}

			oldTable, _ := p.Old.Table("mapper")
			prev := p.Old
			for i, d := range deps {
				if err := Validate(d); err != nil {
					t.Fatalf("D%d: %v", i+1, err)
				}
				if d.Epoch != p.Old.Epoch+int64(i)+1 {
					t.Fatalf("D%d epoch %d, want %d", i+1, d.Epoch, p.Old.Epoch+int64(i)+1)
				}
				tab, _ := d.Table("mapper")
				if tab.Epoch != oldTable.Epoch+int64(i)+1 {
					t.Fatalf("D%d mapper table epoch %d, want %d", i+1, tab.Epoch, oldTable.Epoch+int64(i)+1)
				}
				for _, op := range []string{"source", "sink"} {
					got, _ := d.Table(op)
					want, _ := p.Old.Table(op)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("D%d: table of %s changed: %v", i+1, op, got)
					}
				}
				// Exactly this subscale's buckets change owner, to its pairs' destinations.
				prevTable, _ := prev.Table("mapper")
				want := slices.Clone(prevTable.Buckets)
				for _, pm := range groups[i] {
					for _, b := range pm.Buckets {
						if owner := control.TaskID("mapper", want[b]); owner != pm.From {
							t.Fatalf("D%d: bucket %d owned by %s before, pair says %s", i+1, b, owner, pm.From)
						}
						want[b] = taskIndex(t, d, pm.To)
					}
				}
				if !slices.Equal(tab.Buckets, want) {
					t.Fatalf("D%d routing %v, want %v", i+1, tab.Buckets, want)
				}
				// Added tasks exist from D1 on; removed ones stay until Dk.
				if i < k-1 {
					for _, r := range append(slices.Clone(p.AddedTasks), p.RemovedTasks...) {
						if !slices.Contains(d.Tasks, r) {
							t.Fatalf("D%d lacks task %s", i+1, r.ID)
						}
					}
				}
				for _, r := range p.Old.Tasks {
					if j := slices.IndexFunc(d.Tasks, func(u control.TaskRef) bool { return u.ID == r.ID }); j >= 0 && d.Tasks[j] != r {
						t.Fatalf("D%d moved task %s: %v → %v", i+1, r.ID, r, d.Tasks[j])
					}
				}
				prev = d
			}

			// Dk is p.New, only with its epochs shifted past the intermediates.
			last := deepCopy(t, deps[k-1])
			newTable, _ := p.New.Table("mapper")
			if last.Epoch != p.New.Epoch+int64(k)-1 {
				t.Fatalf("Dk epoch %d, want %d", last.Epoch, p.New.Epoch+int64(k)-1)
			}
			last.Epoch = p.New.Epoch
			for j := range last.Routing {
				if last.Routing[j].Operator == "mapper" {
					last.Routing[j].Epoch = newTable.Epoch
				}
			}
			if !reflect.DeepEqual(last, deepCopy(t, p.New)) {
				t.Fatalf("Dk differs from p.New beyond epochs:\n got %+v\nwant %+v", last, p.New)
			}
			if k == 1 && !reflect.DeepEqual(deepCopy(t, deps[0]), deepCopy(t, p.New)) {
				t.Fatalf("a single subscale must be exactly p.New")
			}

			// Pure: the plan is untouched and a second call gives the same answer.
			if !reflect.DeepEqual(deepCopy(t, p.Old), before) || !reflect.DeepEqual(deepCopy(t, p.New), beforeNew) {
				t.Fatal("Subscales modified its input")
			}
			again, err := Subscales(p, tc.n)
			if err != nil || !reflect.DeepEqual(again, deps) {
				t.Fatalf("second call differs (err %v)", err)
			}
			deps[0].Routing[1].Buckets[0] = 99
			if tab, _ := p.New.Table("mapper"); tab.Buckets[0] == 99 {
				t.Fatal("Subscales aliases p.New's routing table")
			}
		})
	}
}

func taskIndex(t *testing.T, d control.Deployment, id string) int {
	t.Helper()
	for _, task := range d.Tasks {
		if task.ID == id {
			return task.Index
		}
	}
	t.Fatalf("task %s not in deployment", id)
	return -1
}

func TestSubscalesScaleOutTwoToFour(t *testing.T) {
	p := mustScale(t, 64, 2, 4)
	deps, err := Subscales(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	groups := SubscaleGroups(p, 0)
	wantPairs := [][2]string{{"mapper-0", "mapper-2"}, {"mapper-1", "mapper-3"}}
	for i, g := range groups {
		if len(g) != 1 || g[0].From != wantPairs[i][0] || g[0].To != wantPairs[i][1] {
			t.Fatalf("subscale %d: %+v, want pair %v", i+1, g, wantPairs[i])
		}
	}
	d1, _ := deps[0].Table("mapper")
	// D1: mapper-2 has taken its buckets from mapper-0; mapper-1 still owns
	// all of its buckets and mapper-3 none yet.
	counts := map[int]int{}
	for _, owner := range d1.Buckets {
		counts[owner]++
	}
	if counts[0] != 16 || counts[1] != 32 || counts[2] != 16 || counts[3] != 0 {
		t.Fatalf("D1 bucket counts %v", counts)
	}
	if got := len(deps[0].TasksOf("mapper")); got != 4 {
		t.Fatalf("D1 has %d mapper tasks, want 4 (added tasks exist from the start)", got)
	}
}

func TestSubscalesScaleInKeepsRemovedTasksUntilTheEnd(t *testing.T) {
	p := mustScale(t, 64, 4, 2)
	deps, err := Subscales(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) != 2 {
		t.Fatalf("%d subscales", len(deps))
	}
	if got := len(deps[0].TasksOf("mapper")); got != 4 {
		t.Fatalf("D1 has %d mapper tasks, want 4", got)
	}
	d1, _ := deps[0].Table("mapper")
	if slices.Contains(d1.Buckets, 2) || !slices.Contains(d1.Buckets, 3) {
		t.Fatalf("D1: mapper-2 should have handed over everything, mapper-3 nothing yet: %v", d1.Buckets)
	}
	if got := len(deps[1].TasksOf("mapper")); got != 2 {
		t.Fatalf("D2 has %d mapper tasks, want 2", got)
	}
}

func TestSubscalesRejectsInconsistentPlans(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"missing pair", func(p *Plan) { p.MovesByPair = p.MovesByPair[:1] }, "do not lead"},
		{"bucket twice", func(p *Plan) {
			p.MovesByPair[1].Buckets = append(p.MovesByPair[1].Buckets, p.MovesByPair[0].Buckets[0])
		}, "moves twice"},
		{"wrong source", func(p *Plan) { p.MovesByPair[0].From = "mapper-1" }, "old owner"},
		{"unknown task", func(p *Plan) { p.MovesByPair[0].To = "mapper-9" }, "not of operator"},
		{"bucket out of range", func(p *Plan) { p.MovesByPair[0].Buckets = []int{64} }, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustScale(t, 64, 2, 4)
			tc.mutate(&p)
			_, err := Subscales(p, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSubscalesWithoutMoves(t *testing.T) {
	d := mustInitial(t, helloJob(16, 2), workers("w1"))
	p := Plan{Operator: "mapper", Old: d, New: cloneDeployment(d)}
	p.New.Epoch++
	p.New.Routing[1].Epoch++
	deps, err := Subscales(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) != 1 || !reflect.DeepEqual(deps[0], p.New) {
		t.Fatalf("got %+v, want just p.New", deps)
	}
	if g := SubscaleGroups(p, 3); len(g) != 1 || len(g[0]) != 0 {
		t.Fatalf("groups %v, want one empty group", g)
	}
}

func TestNumSubscales(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   int
		err    bool
	}{
		{nil, 0, false},
		{map[string]string{}, 0, false},
		{map[string]string{control.ParamNumSubscales: ""}, 0, false},
		{map[string]string{control.ParamNumSubscales: "0"}, 0, false},
		{map[string]string{control.ParamNumSubscales: "3"}, 3, false},
		{map[string]string{control.ParamNumSubscales: "-1"}, 0, true},
		{map[string]string{control.ParamNumSubscales: "two"}, 0, true},
	} {
		got, err := NumSubscales(tc.params)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("NumSubscales(%v) = %d, %v; want %d, error %v", tc.params, got, err, tc.want, tc.err)
		}
	}
}
