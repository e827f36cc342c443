package statesvc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

type modelEntry struct {
	bucket int
	owner  string
}

// checkKLT compares a KLT with a map model through every read API.
func checkKLT(t *testing.T, k *KLT, model map[string]modelEntry) {
	t.Helper()
	if k.Len() != len(model) {
		t.Fatalf("Len = %d, model %d", k.Len(), len(model))
	}
	for key, e := range model {
		o, ok := k.Lookup([]byte(key))
		if !ok || o != e.owner {
			t.Fatalf("Lookup(%q) = %q,%v want %q", key, o, ok, e.owner)
		}
	}
	all := k.Take(len(model) + 10)
	if len(all) != len(model) {
		t.Fatalf("Take(all) returned %d entries, model %d", len(all), len(model))
	}
	for _, e := range all {
		m, ok := model[string(e.Key)]
		if !ok || m.bucket != e.Bucket || m.owner != e.Owner {
			t.Fatalf("Take entry %+v, model %+v (%v)", e, m, ok)
		}
	}
}

func TestKLTBasics(t *testing.T) {
	k := NewKLT()
	if _, ok := k.Lookup([]byte("x")); ok || k.Len() != 0 || len(k.Take(5)) != 0 {
		t.Fatal("empty KLT not empty")
	}
	k.Add(3, []byte("a"), "task-1")
	k.Add(4, []byte("b"), "task-2")
	k.Add(3, []byte(""), "task-1")  // empty key is a key
	k.Add(5, []byte("a"), "task-3") // update owner and bucket
	if o, ok := k.Lookup([]byte("a")); !ok || o != "task-3" {
		t.Fatalf("Lookup(a) = %q %v", o, ok)
	}
	if o, ok := k.Lookup(nil); !ok || o != "task-1" {
		t.Fatalf("Lookup(empty) = %q %v", o, ok)
	}
	got := k.LookupBatch(keys("a", "zz", "b"), []string{"keep"})
	if !slices.Equal(got, []string{"keep", "task-3", "", "task-2"}) {
		t.Fatalf("LookupBatch = %q", got)
	}
	if k.Len() != 3 || k.Bytes() == 0 {
		t.Fatalf("Len %d Bytes %d", k.Len(), k.Bytes())
	}
	es := k.EntriesForBuckets([]int{5, 4})
	if len(es) != 2 || string(es[0].Key) != "b" || es[1].Bucket != 5 || es[1].Owner != "task-3" {
		t.Fatalf("EntriesForBuckets = %+v", es)
	}
	es[0].Key[0] = 'X' // copies
	if _, ok := k.Lookup([]byte("b")); !ok {
		t.Fatal("EntriesForBuckets aliased the table")
	}
	if bs := k.Buckets(); bs[3] != 1 || bs[4] != 1 || bs[5] != 1 || len(bs) != 3 {
		t.Fatalf("Buckets = %v", bs)
	}
	k.RemoveBuckets([]int{4, 99})
	k.Remove([]byte("nope"))
	if _, ok := k.Lookup([]byte("b")); ok || k.Len() != 2 {
		t.Fatal("RemoveBuckets left b")
	}
	k.Remove([]byte("a"))
	k.Remove(nil)
	if k.Len() != 0 || k.Bytes() > 1024 {
		t.Fatalf("after removing all: Len %d Bytes %d", k.Len(), k.Bytes())
	}
	for name, f := range map[string]func(){
		"empty owner": func() { k.Add(1, []byte("k"), "") },
		"bad bucket":  func() { k.Add(MaxBuckets, []byte("k"), "t") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if err := k.AddEntries([]Entry{{Bucket: 1, Key: []byte("k")}}); err == nil {
		t.Fatal("AddEntries accepted an empty owner")
	}
	if err := k.AddEntries([]Entry{{Bucket: 1, Key: []byte("k"), Owner: "t"}, {Bucket: 2, Key: []byte("l"), Owner: "u"}}); err != nil || k.Len() != 2 {
		t.Fatalf("AddEntries: %v, Len %d", err, k.Len())
	}
	k.RemoveKeys(keys("k", "l", "m"))
	if k.Len() != 0 {
		t.Fatalf("RemoveKeys left %d", k.Len())
	}
}

func TestKLTTakeProgresses(t *testing.T) {
	k := NewKLT()
	for i := range 1000 {
		k.Add(i%16, []byte(fmt.Sprintf("key-%04d", i)), fmt.Sprintf("t%d", i%3))
	}
	seen := map[string]bool{}
	for k.Len() > 0 {
		batch := k.Take(64)
		again := k.Take(64)
		if len(batch) == 0 || !slices.EqualFunc(batch, again, func(a, b Entry) bool { return bytes.Equal(a.Key, b.Key) }) {
			t.Fatal("Take not deterministic or empty while Len > 0")
		}
		for _, e := range batch {
			if seen[string(e.Key)] {
				t.Fatalf("key %q taken twice", e.Key)
			}
			seen[string(e.Key)] = true
			k.Remove(e.Key)
		}
	}
	if len(seen) != 1000 {
		t.Fatalf("took %d keys, want 1000", len(seen))
	}
}

// TestKLTModel runs random operations against a map model, with enough keys
// and removals to trigger index growth, rehash over tombstones, arena
// compaction and long keys spanning dedicated chunks.
func TestKLTModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := NewKLT()
	model := map[string]modelEntry{}
	owners := []string{"a", "b", "c", "task-with-a-long-name"}
	randKey := func() []byte {
		n := rng.IntN(20)
		if rng.IntN(5000) == 0 {
			n = kltChunk + rng.IntN(100) // bigger than a chunk
		} else if rng.IntN(100) == 0 {
			n = 64 + rng.IntN(300) // multi-byte header
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(4)) + 'a'
		}
		return b
	}
	for round := range 6 { // the last rounds remove more than they add: compaction
		addShare := 550 - 100*round
		for range 60000 {
			key := randKey()
			switch op := rng.IntN(1000); {
			case op < addShare:
				b, o := rng.IntN(64), owners[rng.IntN(len(owners))]
				k.Add(b, key, o)
				model[string(key)] = modelEntry{b, o}
			case op < 999:
				k.Remove(key)
				delete(model, string(key))
			default:
				buckets := []int{rng.IntN(64)}
				k.RemoveBuckets(buckets)
				for mk, e := range model {
					if e.bucket == buckets[0] {
						delete(model, mk)
					}
				}
			}
		}
		checkKLT(t, k, model)
		k2, err := DecodeKLT(k.Encode())
		if err != nil {
			t.Fatalf("round %d: decode: %v", round, err)
		}
		checkKLT(t, k2, model)
		if a, b := k.Take(50), k2.Take(50); !slices.EqualFunc(a, b, func(x, y Entry) bool {
			return bytes.Equal(x.Key, y.Key) && x.Owner == y.Owner && x.Bucket == y.Bucket
		}) {
			t.Fatalf("round %d: Take order lost in encoding", round)
		}
	}
}

func TestDecodeKLTRejectsGarbage(t *testing.T) {
	k := NewKLT()
	k.Add(1, []byte("key"), "owner")
	good := k.Encode()
	resum := func(b []byte) []byte {
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crc32Checksum(b))
	}
	body := good[:len(good)-4]
	cases := map[string][]byte{
		"empty":        nil,
		"magic":        []byte("KLT2\x00\x00\x00\x00\x00\x00"),
		"checksum":     append(slices.Clone(body), 0, 0, 0, 0),
		"truncated":    resum(slices.Clone(good[:len(good)-2])),
		"trailing":     resum(append(slices.Clone(body), 7, 0, 0, 0, 0)),
		"huge count":   resum(append([]byte("KLT1\xff\xff\xff\xff\x0f"), 0, 0, 0, 0)),
		"owner range":  resum(append([]byte("KLT1\x01\x01o\x01\x01\x05\x01k"), 0, 0, 0, 0)),
		"bucket range": resum(append([]byte("KLT1\x01\x01o\x01\x80\x80\x04\x00\x01k"), 0, 0, 0, 0)),
		"empty owner":  resum(append([]byte("KLT1\x01\x00\x00"), 0, 0, 0, 0)),
		"dup owner":    resum(append([]byte("KLT1\x02\x01o\x01o\x00"), 0, 0, 0, 0)),
	}
	for name, data := range cases {
		if _, err := DecodeKLT(data); !errors.Is(err, errKLTCorrupt) {
			t.Errorf("%s: DecodeKLT error %v, want corrupt", name, err)
		}
	}
	if k2, err := DecodeKLT(good); err != nil || k2.Len() != 1 {
		t.Fatalf("good input: %v", err)
	}
	if k3, err := DecodeKLT(NewKLT().Encode()); err != nil || k3.Len() != 0 {
		t.Fatalf("empty table: %v", err)
	}
}

func TestKLTConcurrent(t *testing.T) {
	k := NewKLT()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				key := []byte(fmt.Sprintf("k%d-%d", w, i%500))
				switch i % 5 {
				case 0, 1:
					k.Add(i%32, key, fmt.Sprint("t", w))
				case 2:
					k.LookupBatch([][]byte{key, []byte("x")}, nil)
				case 3:
					for _, e := range k.Take(10) {
						k.Remove(e.Key)
					}
				case 4:
					_ = k.Encode()
					_ = k.Bytes()
					_ = k.EntriesForBuckets([]int{i % 32})
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzDecodeKLT(f *testing.F) {
	k := NewKLT()
	k.Add(1, []byte("key"), "owner")
	k.Add(65535, []byte{}, "o2")
	f.Add(k.Encode())
	f.Add(NewKLT().Encode())
	f.Add([]byte("KLT1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Also try the input with a valid checksum so the parser is reached.
		for _, in := range [][]byte{data, append(slices.Clone(data), le32(crc32Checksum(data))...)} {
			k, err := DecodeKLT(in)
			if err != nil {
				continue
			}
			again := k.Encode()
			k2, err := DecodeKLT(again)
			if err != nil || k2.Len() != k.Len() || !bytes.Equal(k2.Encode(), again) {
				t.Fatalf("re-encode not stable: %v", err)
			}
		}
	})
}

func crc32Checksum(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// TestKLTSaturatedDisplacement forces one probe run longer than the 8-bit
// displacement field: 300 keys with the same home slot.
func TestKLTSaturatedDisplacement(t *testing.T) {
	var colliding [][]byte
	want := kltHash([]byte("seed")) >> 48
	for i := 0; len(colliding) < 300; i++ {
		key := binary.LittleEndian.AppendUint64(nil, uint64(i))
		if kltHash(key)>>48 == want { // same home in any index of <= 65536 slots
			colliding = append(colliding, key)
		}
	}
	k := NewKLT()
	model := map[string]modelEntry{}
	for i, key := range colliding {
		k.Add(i%7, key, "o")
		model[string(key)] = modelEntry{i % 7, "o"}
		k.Add(i%7, []byte(fmt.Sprint("plain", i)), "p")
		model[fmt.Sprint("plain", i)] = modelEntry{i % 7, "p"}
	}
	if !k.t.saturated {
		t.Fatal("test did not reach displacement saturation")
	}
	checkKLT(t, k, model)
	for i, key := range colliding {
		if i%2 == 0 {
			k.Remove(key)
			delete(model, string(key))
		}
	}
	checkKLT(t, k, model)
	if _, ok := k.Lookup(colliding[0]); ok {
		t.Fatal("removed colliding key still found")
	}
}

// FuzzKLTOps interprets the input as operations and checks the table against
// a map model after each one.
func FuzzKLTOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 1, 2, 3, 0})
	f.Add([]byte{0, 5, 0, 6, 0, 7, 1, 5, 2, 3, 4, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		k := NewKLT()
		model := map[string]modelEntry{}
		owners := []string{"a", "b", "c"}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, ops[i+1]
			key := []byte{arg % 32}
			bucket := int(arg % 5)
			switch op {
			case 0, 1:
				o := owners[int(arg)%len(owners)]
				k.Add(bucket, key, o)
				model[string(key)] = modelEntry{bucket, o}
			case 2:
				k.Remove(key)
				delete(model, string(key))
			case 3:
				k.RemoveBuckets([]int{bucket})
				for mk, e := range model {
					if e.bucket == bucket {
						delete(model, mk)
					}
				}
			case 4:
				k2, err := DecodeKLT(k.Encode())
				if err != nil {
					t.Fatal(err)
				}
				k = k2
			case 5:
				for _, e := range k.Take(int(arg % 4)) {
					k.Remove(e.Key)
					delete(model, string(e.Key))
				}
			}
			if k.Len() != len(model) {
				t.Fatalf("op %d: Len %d, model %d", i/2, k.Len(), len(model))
			}
		}
		checkKLT(t, k, model)
	})
}
