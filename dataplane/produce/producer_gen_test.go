package produce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// The generators' key streams are recomputed by oracles and must not change:
// the allocation-free helpers give what fmt and rand.Rand give.
func TestKeyNameMatchesFormat(t *testing.T) {
	for _, i := range []int{0, 1, 9, 10, 99, 123456, 999999, 1000000, 9999999, 10000000, 123456789012, -1, -1234567} {
		if got, want := KeyName(i), fmt.Sprintf("k%07d", i); got != want {
			t.Errorf("KeyName(%d) = %q, want %q", i, got, want)
		}
	}
}

func TestUniformKeyIndexMatchesRandIntN(t *testing.T) {
	for _, numKeys := range []int{1, 2, 3, 7, 64, 1000, 100000, 200000, 1 << 20, 1<<31 - 1, 1<<62 + 12345} {
		for n := int64(0); n < 2000; n++ {
			seed := int64(numKeys) ^ 42
			want := rand.New(rand.NewPCG(uint64(seed), uint64(n))).IntN(numKeys)
			if got := UniformKeyIndex(seed, numKeys, n); got != want {
				t.Fatalf("UniformKeyIndex(%d, %d, %d) = %d, want %d", seed, numKeys, n, got, want)
			}
		}
	}
}

func TestZipfIndexMatchesRandFloat64(t *testing.T) {
	z, err := NewZipfKeys(1000, 1.1)
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(0); n < 2000; n++ {
		u := rand.New(rand.NewPCG(5, uint64(n)^0x9e3779b97f4a7c15)).Float64()
		want := 0
		for want < len(z.cdf)-1 && z.cdf[want] < u {
			want++
		}
		if got := z.Index(5, n); got != want {
			t.Fatalf("Index(5, %d) = %d, want %d (u %v)", n, got, want, u)
		}
	}
}

func TestGeneratorRecordLayout(t *testing.T) {
	for _, vs := range []int{0, 8, 100} {
		g := &keysGenerator{numKeys: 50, seed: 9, valueSize: vs}
		var r wire.Record
		g.Next(77, &r)
		if want := KeyName(UniformKeyIndex(9, 50, 77)); string(r.Key) != want || cap(r.Key) != len(r.Key) {
			t.Errorf("valueSize %d: key %q (cap %d), want %q with no spare capacity", vs, r.Key, cap(r.Key), want)
		}
		if len(r.Value) != max(vs, 8) || binary.LittleEndian.Uint64(r.Value) != 77 {
			t.Errorf("valueSize %d: value %x, want %d bytes starting with 77", vs, r.Value, max(vs, 8))
		}
		for _, b := range r.Value[8:] {
			if b != 0 {
				t.Fatalf("valueSize %d: padding %x not zero", vs, r.Value)
			}
		}
	}
}

func BenchmarkKeysGenerator(b *testing.B) {
	g := &keysGenerator{numKeys: 100000, seed: 1}
	var r wire.Record
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Next(int64(i), &r)
	}
}

// Generators that take the producer's clock reading stamp it as event time
// and otherwise make the same records as Next.
func TestStampedGeneratorsMatchNext(t *testing.T) {
	for _, name := range []string{DefaultGenerator, SequentialGenerator, ZipfGenerator} {
		req := control.ProduceRequest{Generator: name, NumKeys: 1000, Seed: 4, Skew: 1.2, ValueSize: 12}
		a, err := NewGenerator(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewGenerator(req)
		sg, ok := b.(stampedGenerator)
		if !ok {
			t.Fatalf("%s: does not take the producer's event time", name)
		}
		for n := int64(0); n < 100; n++ {
			var x, y wire.Record
			a.Next(n, &x)
			sg.NextAt(n, 12345, &y)
			if !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Value, y.Value) || y.EventTime != 12345 {
				t.Fatalf("%s record %d: Next %q/%x, NextAt %q/%x at %d", name, n, x.Key, x.Value, y.Key, y.Value, y.EventTime)
			}
		}
	}
}
