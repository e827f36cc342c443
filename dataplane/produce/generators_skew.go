package produce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// ZipfGenerator draws keys from a Zipf distribution over NumKeys keys:
// key index k (KeyName(k)) has probability proportional to 1/(k+1)^Skew, so
// k0000000 is the hottest. Skew 0 is uniform; 1 is classic Zipf. Record n
// depends only on (Seed, n), like the "keys" generator, so oracles can
// recompute the input with ZipfKeys.Index.
const ZipfGenerator = "zipf"

// MaxZipfKeys bounds NumKeys of the zipf generator (its table is 8 bytes a key).
const MaxZipfKeys = 1 << 24

// ZipfKeys is the inverse-CDF table of a Zipf key distribution.
type ZipfKeys struct {
	cdf []float64 // cdf[k] = P(index ≤ k), cdf[n-1] = 1
}

// NewZipfKeys builds the table for numKeys keys with exponent skew.
func NewZipfKeys(numKeys int, skew float64) (*ZipfKeys, error) {
	if numKeys < 1 || numKeys > MaxZipfKeys {
		return nil, fmt.Errorf("generator %q: NumKeys %d must be between 1 and %d", ZipfGenerator, numKeys, MaxZipfKeys)
	}
	if skew < 0 || math.IsNaN(skew) || math.IsInf(skew, 0) || skew > 10 {
		return nil, fmt.Errorf("generator %q: Skew %v must be between 0 and 10", ZipfGenerator, skew)
	}
	cdf := make([]float64, numKeys)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -skew)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[numKeys-1] = 1
	return &ZipfKeys{cdf: cdf}, nil
}

// Index is the key index of record n for seed.
func (z *ZipfKeys) Index(seed int64, n int64) int {
	// rand.New(src).Float64(), without allocating a Rand per record.
	src := rand.NewPCG(uint64(seed), uint64(n)^0x9e3779b97f4a7c15)
	u := float64(src.Uint64()<<11>>11) / (1 << 53)
	i := sort.SearchFloat64s(z.cdf, u)
	return min(i, len(z.cdf)-1)
}

// Prob is the probability of key index k.
func (z *ZipfKeys) Prob(k int) float64 {
	if k == 0 {
		return z.cdf[0]
	}
	return z.cdf[k] - z.cdf[k-1]
}

// BucketLoad is the expected share of records per bucket of numBuckets
// (BucketOf of the key names): what a rebalance plans from when the
// experiment declares its skew instead of measuring it.
func (z *ZipfKeys) BucketLoad(numBuckets int) []float64 {
	out := make([]float64, max(numBuckets, 1))
	for k := range z.cdf {
		out[statesvc.BucketOf([]byte(KeyName(k)), numBuckets)] += z.Prob(k)
	}
	return out
}

type zipfGenerator struct {
	keys      *ZipfKeys
	seed      int64
	valueSize int
	arena     byteArena
}

func (g *zipfGenerator) Next(n int64, r *wire.Record) { g.NextAt(n, time.Now().UnixNano(), r) }

func (g *zipfGenerator) NextAt(n, now int64, r *wire.Record) {
	r.Key, r.Value = keyAndValue(&g.arena, g.keys.Index(g.seed, n), n, g.valueSize)
	r.EventTime = now
}

func init() {
	_ = RegisterGenerator(ZipfGenerator, func(req control.ProduceRequest) (Generator, error) {
		z, err := NewZipfKeys(req.NumKeys, req.Skew)
		if err != nil {
			return nil, err
		}
		return &zipfGenerator{keys: z, seed: req.Seed, valueSize: req.ValueSize}, nil
	})
}
