package statesvc

import (
	"fmt"
	"testing"
)

func TestZZProbeStats(t *testing.T) {
	k, _ := benchKLT()
	n := len(k.t.slots)
	// average unsuccessful probe length
	total, runs := 0, 0
	for i := 0; i < n; i += 97 {
		j := i
		for k.t.slots[j] != 0 {
			j++
			if j == n {
				j = 0
			}
		}
		total += j - i + 1
		runs++
	}
	t.Logf("slots %d live %d load %.3f avg miss probe %.2f", n, k.t.live, float64(k.t.live)/float64(n), float64(total)/float64(runs))
}

func BenchmarkZZPhases(b *testing.B) {
	k, ks := benchKLT()
	var misses [][][]byte
	for _, batch := range benchBatches(ks, 64) {
		var m [][]byte
		var buf []byte
		for _, key := range batch {
			buf = append(buf, 'x')
			buf = append(buf, key...)
		}
		for i := range batch {
			m = append(m, buf[9*i:9*i+9])
		}
		misses = append(misses, m)
	}
	t := &k.t
	b.Run("hash", func(b *testing.B) {
		var s uint64
		for i := 0; i < b.N; i++ {
			for _, key := range misses[i%64] {
				s += uint64(t.home(kltHash(key)))
			}
		}
		kltSink += s
	})
	b.Run("hash+touch", func(b *testing.B) {
		var s uint64
		var homes [1000]int
		for i := 0; i < b.N; i++ {
			for j, key := range misses[i%64] {
				homes[j] = t.home(kltHash(key))
			}
			for _, h := range homes {
				s += t.slots[h]
			}
		}
		kltSink += s
	})
	b.Run("findBatch", func(b *testing.B) {
		out := make([]int, 1000)
		for i := 0; i < b.N; i++ {
			kltSink += t.findBatch(misses[i%64], out)
		}
	})
	b.Run("find", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, key := range misses[i%64] {
				kltSink += uint64(t.find(key, kltHash(key)))
			}
		}
	})
}

func BenchmarkZZSmall(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		k := NewKLT()
		var ks [][]byte
		for i := range n {
			key := kltBenchKey(i)
			ks = append(ks, key)
			k.Add(i%128, key, "t")
		}
		batches := benchBatches(ks, 64)
		for bi, batch := range batches {
			var m [][]byte
			for _, key := range batch {
				m = append(m, append([]byte("x"), key...))
			}
			batches[bi] = m
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			out := make([]int, 1000)
			for i := 0; i < b.N; i++ {
				kltSink += k.t.findBatch(batches[i%64], out)
			}
		})
	}
}
