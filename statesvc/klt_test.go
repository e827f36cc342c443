package statesvc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

const testBuckets = 16

// kltModel is the reference: per key, the owners of its entries (a
// multiset, like the table).
type kltModel map[string][]string

func (m kltModel) entries() int {
	n := 0
	for _, os := range m {
		n += len(os)
	}
	return n
}

func addKey(k *KLT, m kltModel, key []byte, owner string) {
	k.Add(BucketOf(key, k.NumBuckets()), key, owner)
	m[string(key)] = append(m[string(key)], owner)
}

// checkKLT checks that no key of the model reads as local or misses one of
// its owners, and that the entry counts agree.
func checkKLT(t *testing.T, k *KLT, m kltModel) {
	t.Helper()
	if k.Len() != m.entries() {
		t.Fatalf("Len = %d, model %d", k.Len(), m.entries())
	}
	perBucket := map[int]int{}
	var keys [][]byte
	for key, owners := range m {
		perBucket[BucketOf([]byte(key), k.NumBuckets())] += len(owners)
		keys = append(keys, []byte(key))
		o, ok := k.Lookup([]byte(key))
		for _, want := range owners {
			if !ok || !slices.Contains(SplitOwners(o), want) {
				t.Fatalf("Lookup(%q) = %q,%v, want owner %q among them", key, o, ok, want)
			}
		}
	}
	for bi, n := range perBucket {
		if n == 0 {
			delete(perBucket, bi)
		}
	}
	if got := k.Buckets(); !mapsEqual(got, perBucket) {
		t.Fatalf("Buckets = %v, model %v", got, perBucket)
	}
	// Exact answers: the table keeps (bucket, 32-bit hash, owner) entries, so
	// a key reads as the sorted distinct owners of every entry sharing its
	// bucket and hash (its own and those of colliding keys), joined by
	// OwnerSep. Absent keys are probed too.
	byHash := map[[2]uint64][]string{}
	for key, owners := range m {
		b, h := kltHash([]byte(key), k.NumBuckets())
		byHash[[2]uint64{uint64(b), uint64(h)}] = append(byHash[[2]uint64{uint64(b), uint64(h)}], owners...)
	}
	for i := range 200 {
		keys = append(keys, []byte(fmt.Sprintf("absent-%d", i)))
	}
	batch := k.LookupBatch(keys, nil)
	for i, key := range keys {
		b, h := kltHash(key, k.NumBuckets())
		want := slices.Compact(slices.Sorted(slices.Values(byHash[[2]uint64{uint64(b), uint64(h)}])))
		if got := batch[i]; got != strings.Join(want, OwnerSep) {
			t.Fatalf("LookupBatch[%q] = %q, want %q", key, got, strings.Join(want, OwnerSep))
		}
		if o, _ := k.Lookup(key); batch[i] != o {
			t.Fatalf("LookupBatch[%q] = %q, Lookup %q", key, batch[i], o)
		}
	}
}

func mapsEqual(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestKLTBasics(t *testing.T) {
	k := NewKLT(testBuckets)
	if _, ok := k.Lookup([]byte("x")); ok || k.Len() != 0 {
		t.Fatal("empty KLT not empty")
	}
	if _, _, ok := k.Next(); ok {
		t.Fatal("Next on an empty table")
	}
	m := kltModel{}
	addKey(k, m, []byte("a"), "task-1")
	addKey(k, m, []byte("b"), "task-2")
	addKey(k, m, []byte(""), "task-1") // the empty key is a key
	checkKLT(t, k, m)
	got := k.LookupBatch(keys("a", "zz", "b"), []string{"keep"})
	if !slices.Equal(got, []string{"keep", "task-1", "", "task-2"}) {
		t.Fatalf("LookupBatch = %q", got)
	}
	addKey(k, m, []byte("a"), "task-3") // a second owner for a: both reported
	if o, _ := k.Lookup([]byte("a")); o != "task-1"+OwnerSep+"task-3" {
		t.Fatalf("Lookup(a) with two owners = %q", o)
	}
	if !slices.Equal(SplitOwners("task-1"+OwnerSep+"task-3"), []string{"task-1", "task-3"}) || !slices.Equal(SplitOwners("x"), []string{"x"}) {
		t.Fatal("SplitOwners")
	}
	k.RemoveKeys("task-9", keys("a")) // unknown owner: nothing
	k.RemoveKeys("task-2", keys("a")) // a has no task-2 entry: nothing
	checkKLT(t, k, m)
	k.RemoveKeys("task-1", keys("a"))
	m["a"] = []string{"task-3"}
	checkKLT(t, k, m)
	if o, _ := k.Lookup([]byte("a")); o != "task-3" {
		t.Fatalf("Lookup(a) after its task-1 entry went = %q", o)
	}

	// Segments and AddSegment move entries to another table.
	var all []int
	for b := range testBuckets {
		all = append(all, b)
	}
	k2 := NewKLT(testBuckets)
	for _, s := range k.Segments(all) {
		if err := k2.AddSegment(s); err != nil {
			t.Fatal(err)
		}
	}
	checkKLT(t, k2, m)
	if !bytes.Equal(k.Encode(), k2.Encode()) {
		t.Fatal("tables with equal entries encode differently")
	}

	// Next names each (bucket, owner) until DropSegment empties the table.
	for range 10 {
		b, o, ok := k2.Next()
		if !ok {
			break
		}
		k2.DropSegment(b, o)
	}
	if k2.Len() != 0 || k2.Bytes() > 1024 {
		t.Fatalf("after dropping every segment: Len %d Bytes %d", k2.Len(), k2.Bytes())
	}

	bb := BucketOf([]byte("b"), testBuckets)
	k.RemoveBuckets([]int{bb, 99, -1})
	delete(m, "b")
	if BucketOf([]byte("a"), testBuckets) == bb {
		delete(m, "a")
	}
	if BucketOf([]byte(""), testBuckets) == bb {
		delete(m, "")
	}
	checkKLT(t, k, m)

	for name, f := range map[string]func(){
		"empty owner": func() { k.Add(BucketOf([]byte("k"), testBuckets), []byte("k"), "") },
		"NUL owner":   func() { k.Add(BucketOf([]byte("k"), testBuckets), []byte("k"), "a\x00b") },
		"bad bucket":  func() { k.Add(BucketOf([]byte("k"), testBuckets)+1, []byte("k"), "t") },
		"huge table":  func() { NewKLT(MaxBuckets + 1) },
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
	for name, s := range map[string]Segment{
		"empty owner": {Bucket: 1, Hashes: []uint32{1}},
		"bucket":      {Bucket: testBuckets, Owner: "t", Hashes: []uint32{1}},
		"negative":    {Bucket: -1, Owner: "t", Hashes: []uint32{1}},
	} {
		if err := k.AddSegment(s); err == nil {
			t.Errorf("AddSegment accepted a segment with a bad %s", name)
		}
	}
}

// TestKLTModel runs random operations against a model, with enough keys to
// merge buffers into sequences, rebuild after removals, give buckets
// several owners and round-trip the encoding.
func TestKLTModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := NewKLT(testBuckets)
	m := kltModel{}
	owners := []string{"a", "b", "c", "task-with-a-long-name"}
	for round := range 6 {
		addShare := 600 - 100*round // later rounds remove more than they add
		for range 40_000 {
			key := []byte(fmt.Sprintf("k%d", rng.IntN(60_000)))
			switch op := rng.IntN(1000); {
			case op < 4:
				// A handoff's segment: up to 2000 keys of one bucket, as
				// unsorted hashes, duplicates included.
				b, o := -1, owners[rng.IntN(len(owners))]
				var hs []uint32
				for range rng.IntN(2000) {
					key := []byte(fmt.Sprintf("k%d", rng.IntN(60_000)))
					kb, h := KLTHash(key, testBuckets)
					if b < 0 {
						b = kb
					}
					if kb == b {
						hs = append(hs, h)
						m[string(key)] = append(m[string(key)], o)
					}
				}
				if err := k.AddSegment(Segment{Bucket: max(b, 0), Owner: o, Hashes: hs}); err != nil {
					t.Fatal(err)
				}
			case op < addShare:
				addKey(k, m, key, owners[rng.IntN(len(owners))])
			case op < 995:
				os := m[string(key)]
				if len(os) == 0 {
					continue
				}
				o := os[rng.IntN(len(os))]
				k.RemoveKeys(o, [][]byte{key})
				os = slices.Delete(os, slices.Index(os, o), slices.Index(os, o)+1)
				if len(os) == 0 {
					delete(m, string(key))
				} else {
					m[string(key)] = os
				}
			default:
				b, o := rng.IntN(testBuckets), owners[rng.IntN(len(owners))]
				k.DropSegment(b, o)
				for mk, os := range m {
					if BucketOf([]byte(mk), testBuckets) == b {
						os = slices.DeleteFunc(os, func(x string) bool { return x == o })
						if len(os) == 0 {
							delete(m, mk)
						} else {
							m[mk] = os
						}
					}
				}
			}
		}
		checkKLT(t, k, m)
		enc := k.Encode()
		k2, err := DecodeKLT(enc)
		if err != nil {
			t.Fatalf("round %d: decode: %v", round, err)
		}
		checkKLT(t, k2, m)
		if !bytes.Equal(k2.Encode(), enc) {
			t.Fatalf("round %d: encoding not canonical", round)
		}
	}
}

// TestKLTFalsePositives measures how often an absent key reads as remote:
// about entries-per-bucket / 2^32 is expected.
func TestKLTFalsePositives(t *testing.T) {
	const n, probes = 200_000, 2_000_000
	k := NewKLT(128)
	for i := range n {
		key := binary.BigEndian.AppendUint64(nil, uint64(i))
		k.Add(BucketOf(key, 128), key, "old")
	}
	fp := 0
	var batch [][]byte
	var dst []string
	for i := range probes {
		batch = append(batch, binary.BigEndian.AppendUint64([]byte("absent"), uint64(i)))
		if len(batch) == 1000 {
			dst = k.LookupBatch(batch, dst[:0])
			for _, o := range dst {
				if o != "" {
					fp++
				}
			}
			batch = batch[:0]
		}
	}
	// Expected: 2e6 × (200000/128) / 2^32 ≈ 0.7.
	if fp > 10 {
		t.Fatalf("%d false positives in %d lookups of absent keys", fp, probes)
	}
	t.Logf("%d false positives in %d lookups (%.2g)", fp, probes, float64(fp)/probes)
}

func TestDecodeKLTRejectsGarbage(t *testing.T) {
	k := NewKLT(4)
	key := []byte("key")
	k.Add(BucketOf(key, 4), key, "owner")
	good := k.Encode()
	resum := func(b []byte) []byte {
		return binary.LittleEndian.AppendUint32(b, crc32Checksum(b))
	}
	body := good[:len(good)-4]
	cases := map[string][]byte{
		"empty":          nil,
		"magic":          []byte("KLT1\x00\x00\x00\x00\x00\x00"),
		"checksum":       append(slices.Clone(body), 0, 0, 0, 0),
		"truncated":      resum(slices.Clone(body[:len(body)-1])),
		"trailing":       resum(append(slices.Clone(body), 7)),
		"no buckets":     resum([]byte("KLT2\x00\x00\x00")),
		"many buckets":   resum([]byte("KLT2\x81\x80\x04\x00\x00")),
		"huge count":     resum([]byte("KLT2\x04\xff\xff\xff\xff\x0f")),
		"owner range":    resum([]byte("KLT2\x04\x01\x01o\x01\x00\x05\x01\x01")),
		"bucket range":   resum([]byte("KLT2\x04\x01\x01o\x01\x04\x00\x01\x01")),
		"hash range":     resum([]byte("KLT2\x04\x01\x01o\x01\x00\x00\x02\xff\xff\xff\xff\x0f\x01")),
		"empty owner":    resum([]byte("KLT2\x04\x01\x00\x00")),
		"NUL owner":      resum([]byte("KLT2\x04\x01\x02o\x00\x00")),
		"dup owner":      resum([]byte("KLT2\x04\x02\x01o\x01o\x00")),
		"hash count big": resum([]byte("KLT2\x04\x01\x01o\x01\x00\x00\x09\x01")),
	}
	for name, data := range cases {
		if _, err := DecodeKLT(data); !errors.Is(err, errKLTCorrupt) {
			t.Errorf("%s: DecodeKLT error %v, want corrupt", name, err)
		}
	}
	if k2, err := DecodeKLT(good); err != nil || k2.Len() != 1 {
		t.Fatalf("good input: %v", err)
	}
	if k3, err := DecodeKLT(NewKLT(1).Encode()); err != nil || k3.Len() != 0 {
		t.Fatalf("empty table: %v", err)
	}
}

func TestKLTConcurrent(t *testing.T) {
	k := NewKLT(testBuckets)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("t", w)
			for i := range 3000 {
				key := []byte(fmt.Sprintf("k%d-%d", w, i%500))
				switch i % 5 {
				case 0, 1:
					k.Add(BucketOf(key, testBuckets), key, owner)
				case 2:
					k.LookupBatch([][]byte{key, []byte("x")}, nil)
				case 3:
					k.RemoveKeys(owner, [][]byte{key})
					if b, o, ok := k.Next(); ok && i%50 == 3 {
						k.DropSegment(b, o)
					}
				case 4:
					_ = k.Encode()
					_ = k.Bytes()
					_ = k.Segments([]int{i % testBuckets})
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzDecodeKLT(f *testing.F) {
	k := NewKLT(MaxBuckets)
	k.Add(BucketOf([]byte("key"), MaxBuckets), []byte("key"), "owner")
	k.Add(BucketOf(nil, MaxBuckets), nil, "o2")
	f.Add(k.Encode())
	f.Add(NewKLT(1).Encode())
	f.Add([]byte("KLT2"))
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

// FuzzKLTOps interprets the input as operations and checks the table against
// the model after each one.
func FuzzKLTOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 1, 2, 3, 0})
	f.Add([]byte{0, 5, 0, 6, 0, 7, 1, 5, 2, 3, 4, 4, 5, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		k := NewKLT(5)
		m := kltModel{}
		owners := []string{"a", "b", "c"}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, ops[i+1]
			key := []byte{arg % 32}
			switch op {
			case 0, 1:
				addKey(k, m, key, owners[int(arg/32)%len(owners)])
			case 2:
				if os := m[string(key)]; len(os) > 0 {
					k.RemoveKeys(os[0], [][]byte{key})
					if m[string(key)] = os[1:]; len(os) == 1 {
						delete(m, string(key))
					}
				}
			case 3:
				b, o := int(arg%5), owners[int(arg/5)%len(owners)]
				k.DropSegment(b, o)
				for mk, os := range m {
					if BucketOf([]byte(mk), 5) == b {
						if os = slices.DeleteFunc(os, func(x string) bool { return x == o }); len(os) == 0 {
							delete(m, mk)
						} else {
							m[mk] = os
						}
					}
				}
			case 4:
				k2, err := DecodeKLT(k.Encode())
				if err != nil {
					t.Fatal(err)
				}
				k = k2
			case 5:
				k.RemoveBuckets([]int{int(arg % 5)})
				for mk := range m {
					if BucketOf([]byte(mk), 5) == int(arg%5) {
						delete(m, mk)
					}
				}
			}
			if k.Len() != m.entries() {
				t.Fatalf("op %d: Len %d, model %d", i/2, k.Len(), m.entries())
			}
		}
		checkKLT(t, k, m)
	})
}

// TestKLTBatchEdgeCases checks LookupBatch on the bucket states its passes
// special-case: a bucket made by an empty segment, a bucket emptied by
// removals while the table is not, removed entries awaiting a rebuild,
// several owners in one bucket and for one key, and stored hashes at both
// ends of the 32-bit range.
func TestKLTBatchEdgeCases(t *testing.T) {
	const nb = 4
	k := NewKLT(nb)
	m := kltModel{}
	if err := k.AddSegment(Segment{Bucket: 2, Owner: "a"}); err != nil { // empty segment
		t.Fatal(err)
	}
	probe := keys("p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7")
	if got := k.LookupBatch(probe, nil); slices.ContainsFunc(got, func(o string) bool { return o != "" }) {
		t.Fatalf("empty table: LookupBatch = %q", got)
	}

	// 300 keys of one bucket, then all removed: the bucket is rebuilt
	// empty but stays, since another bucket keeps the table non-empty.
	var gone [][]byte
	for i := 0; len(gone) < 300; i++ {
		if key := []byte(fmt.Sprint("gone-", i)); BucketOf(key, nb) == 1 {
			k.Add(1, key, "a")
			gone = append(gone, key)
		}
	}
	addKey(k, m, []byte("stay"), "b")
	if BucketOf([]byte("stay"), nb) == 1 {
		t.Fatal("pick another key for bucket != 1")
	}
	k.RemoveKeys("a", gone)
	if got := k.LookupBatch(gone, nil); slices.ContainsFunc(got, func(o string) bool { return o != "" }) {
		t.Fatalf("removed keys read as remote: %q", got)
	}
	checkKLT(t, k, m)

	// Many keys in every bucket with three owners (packed owner bits), a
	// few removed (dead entries, no rebuild yet), one key with two owners.
	owners := []string{"a", "b", "c"}
	for i := range 4000 {
		addKey(k, m, []byte(fmt.Sprint("k", i)), owners[i%3])
	}
	k.Lookup(nil) // merge the additions
	for i := 0; i < 4000; i += 400 {
		key := fmt.Sprint("k", i)
		k.RemoveKeys(owners[i%3], [][]byte{[]byte(key)})
		delete(m, key)
	}
	addKey(k, m, []byte("k1"), "c")
	checkKLT(t, k, m)

	// Hashes 0, 1, max-1 and max stored for a fifth owner in every
	// bucket: they come back from Segments and disturb no other answer.
	ends := []uint32{0, 1, 1<<32 - 2, 1<<32 - 1}
	var all [][]byte
	for key := range m {
		all = append(all, []byte(key))
	}
	all = append(all, probe...)
	before := k.LookupBatch(all, nil)
	for b := range nb {
		if err := k.AddSegment(Segment{Bucket: b, Owner: "z", Hashes: ends}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range k.Segments([]int{0, 1, 2, 3}) {
		if s.Owner == "z" && !slices.Equal(s.Hashes, ends) {
			t.Fatalf("bucket %d: segment of z = %v, want %v", s.Bucket, s.Hashes, ends)
		}
	}
	if after := k.LookupBatch(all, nil); !slices.Equal(after, before) {
		t.Fatal("answers changed when entries with extreme hashes were added")
	}
	if k.Len() != m.entries()+len(ends)*nb {
		t.Fatalf("Len = %d, want %d", k.Len(), m.entries()+len(ends)*nb)
	}
	for b := range nb {
		k.DropSegment(b, "z")
	}
	checkKLT(t, k, m)
}

// TestKLTOwners lists the owners with live entries only, sorted: an owner
// whose entries were all taken, dropped or moved away is not named.
func TestKLTOwners(t *testing.T) {
	k := NewKLT(testBuckets)
	if got := k.Owners(); len(got) != 0 {
		t.Fatalf("empty table: owners %v", got)
	}
	ka, kb, kc := []byte("a"), []byte("b"), []byte("c")
	k.Add(BucketOf(ka, testBuckets), ka, "t2")
	k.Add(BucketOf(kb, testBuckets), kb, "t1")
	k.Add(BucketOf(kc, testBuckets), kc, "t3")
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"added", func() {}, []string{"t1", "t2", "t3"}},
		{"b taken from t1", func() { k.RemoveKeys("t1", [][]byte{kb}) }, []string{"t2", "t3"}},
		{"c's bucket dropped for t3", func() { k.DropSegment(BucketOf(kc, testBuckets), "t3") }, []string{"t2"}},
		{"a's bucket moved away", func() { k.RemoveBuckets([]int{BucketOf(ka, testBuckets)}) }, nil},
	}
	for _, s := range steps {
		s.do()
		if got := k.Owners(); !slices.Equal(got, s.want) {
			t.Errorf("%s: owners %v, want %v", s.name, got, s.want)
		}
	}
}
