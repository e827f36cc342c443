package statesvc

import (
	"fmt"
	"slices"
	"testing"
)

// TestKLTHeads: the (bucket, owner) pairs with entries and their counts,
// in Next's order, through buffered additions, merges, removals of single
// keys and of whole segments, for buckets with one owner and with two.
func TestKLTHeads(t *testing.T) {
	const nb = 8
	k := NewKLT(nb)
	want := map[SegmentHead]bool{}
	count := map[[2]string]int{}
	keysOf := map[[2]string][][]byte{}
	for i := range 3000 {
		key := fmt.Appendf(nil, "key-%d", i)
		b := BucketOf(key, nb)
		owner := "a"
		if b == 2 && i%3 == 0 {
			owner = "b" // bucket 2 has two owners
		}
		if b == 5 {
			owner = "c" // bucket 5: another single owner
		}
		k.Add(b, key, owner)
		id := [2]string{fmt.Sprint(b), owner}
		count[id]++
		keysOf[id] = append(keysOf[id], key)
	}
	check := func(what string) {
		t.Helper()
		clear(want)
		for id, n := range count {
			if n > 0 {
				var b int
				fmt.Sscan(id[0], &b)
				want[SegmentHead{Bucket: b, Owner: id[1], Entries: n}] = true
			}
		}
		got := k.Heads()
		if len(got) != len(want) {
			t.Fatalf("%s: %d heads %v, want %d", what, len(got), got, len(want))
		}
		for _, h := range got {
			if !want[h] {
				t.Fatalf("%s: head %+v not expected (want %v)", what, h, want)
			}
		}
		if !slices.IsSortedFunc(got, func(x, y SegmentHead) int { return x.Bucket - y.Bucket }) {
			t.Fatalf("%s: heads out of bucket order: %v", what, got)
		}
		if b, o, ok := k.Next(); !ok || b != got[0].Bucket || o != got[0].Owner {
			t.Fatalf("%s: Next is (%d, %s, %v), first head %+v", what, b, o, ok, got[0])
		}
	}
	check("after adding")
	id := [2]string{"2", "b"}
	k.RemoveKeys("b", keysOf[id][:10])
	count[id] -= 10
	id = [2]string{"5", "c"}
	k.RemoveKeys("c", keysOf[id][:len(keysOf[id])/2])
	count[id] -= len(keysOf[id]) / 2
	check("after removing keys")
	k.DropSegment(2, "a")
	count[[2]string{"2", "a"}] = 0
	k.RemoveBuckets([]int{0})
	count[[2]string{"0", "a"}] = 0
	check("after dropping a segment and a bucket")
	k.Add(5, keysOf[[2]string{"5", "c"}][0], "a") // a buffered addition of a second owner
	count[[2]string{"5", "a"}]++
	check("after a buffered addition")
}
