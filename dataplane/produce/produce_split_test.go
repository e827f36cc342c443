package produce

import (
	"slices"
	"testing"

	"koala/dataplane/control"
)

func TestSplitProduce(t *testing.T) {
	type share struct {
		rate   int
		events int64
		seed   int64
		files  []string
	}
	for _, tc := range []struct {
		name string
		req  control.ProduceRequest
		n    int
		want []share
	}{
		{name: "one producer keeps the request", req: control.ProduceRequest{RatePerSec: 100, MaxEvents: 7, Seed: 5}, n: 1,
			want: []share{{100, 7, 5, nil}}},
		{name: "n below one is one", req: control.ProduceRequest{RatePerSec: 100, Seed: 5}, n: 0,
			want: []share{{100, 0, 5, nil}}},
		{name: "remainders go to the first producers", req: control.ProduceRequest{RatePerSec: 10, MaxEvents: 11, Seed: 1}, n: 3,
			want: []share{{4, 4, 1, nil}, {3, 4, 2, nil}, {3, 3, 3, nil}}},
		{name: "files are dealt out, never read twice", req: control.ProduceRequest{RatePerSec: 9, FilePath: []string{"a", "b", "c"}}, n: 2,
			want: []share{{5, 0, 0, []string{"a", "c"}}, {4, 0, 1, []string{"b"}}}},
		{name: "no more producers than files", req: control.ProduceRequest{RatePerSec: 9, FilePath: []string{"a"}}, n: 4,
			want: []share{{9, 0, 0, []string{"a"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SplitProduce(tc.req, tc.n)
			if len(got) != len(tc.want) {
				t.Fatalf("%d producers, want %d", len(got), len(tc.want))
			}
			var rate int
			var events int64
			for i, w := range tc.want {
				g := got[i]
				if g.Producer != i {
					t.Errorf("producer %d has index %d", i, g.Producer)
				}
				if g.RatePerSec != w.rate || g.MaxEvents != w.events || g.Seed != w.seed || !slices.Equal(g.FilePath, w.files) {
					t.Errorf("producer %d: rate %d events %d seed %d files %v, want %+v", i, g.RatePerSec, g.MaxEvents, g.Seed, g.FilePath, w)
				}
				rate += g.RatePerSec
				events += g.MaxEvents
			}
			if rate != tc.req.RatePerSec || events != tc.req.MaxEvents {
				t.Errorf("shares add up to rate %d events %d, want %d and %d", rate, events, tc.req.RatePerSec, tc.req.MaxEvents)
			}
		})
	}
}
