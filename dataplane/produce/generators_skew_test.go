package produce

import (
	"math"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

func TestZipfGenerator(t *testing.T) {
	g, err := NewGenerator(control.ProduceRequest{Generator: ZipfGenerator, NumKeys: 1000, Skew: 1.1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	z, _ := NewZipfKeys(1000, 1.1)
	counts := map[string]int{}
	const n = 200000
	for i := int64(0); i < n; i++ {
		var r wire.Record
		g.Next(i, &r)
		if want := KeyName(z.Index(3, i)); string(r.Key) != want {
			t.Fatalf("record %d: key %s, oracle %s", i, r.Key, want)
		}
		counts[string(r.Key)]++
	}
	// The hottest key's share is close to its probability.
	got := float64(counts[KeyName(0)]) / n
	if math.Abs(got-z.Prob(0)) > 0.01 {
		t.Fatalf("hottest key share %.4f, want ≈ %.4f", got, z.Prob(0))
	}
	if counts[KeyName(0)] < 10*counts[KeyName(99)] {
		t.Fatalf("not skewed: k0 %d, k99 %d", counts[KeyName(0)], counts[KeyName(99)])
	}
	sum := 0.0
	for _, l := range z.BucketLoad(64) {
		sum += l
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("bucket load sums to %v", sum)
	}
	for _, req := range []control.ProduceRequest{{NumKeys: 0, Skew: 1}, {NumKeys: 10, Skew: -1}} {
		req.Generator = ZipfGenerator
		if _, err := NewGenerator(req); err == nil || !strings.Contains(err.Error(), `generator "zipf"`) {
			t.Fatalf("%+v: err %v", req, err)
		}
	}
}
