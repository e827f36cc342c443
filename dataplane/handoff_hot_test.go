package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// TestLazyHandoffSendsHotState: a lazy handoff's old owner sends, after
// the lookup entries, the state of the keys of the moving buckets it wrote
// last, every state of each, up to its budget; the new owner stores them
// and drops their entries, the old owner deletes them, and every other key
// stays where it was, still in the new owner's table. No key is lost,
// duplicated or left with an old value, whichever task holds it. With a
// budget of 0 nothing is sent.
func TestLazyHandoffSendsHotState(t *testing.T) {
	for _, budget := range []int{0, 64 << 10} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) { testHotState(t, budget) })
	}
}

func testHotState(t *testing.T, budget int) {
	const keys, hot = 20_000, 300
	owner, gainer := newCounterPair(t, "hot", pushBuckets, statesvc.BackendPebble, true, nil)
	for _, tk := range []*task{owner, gainer} {
		tk.keyed.names = []string{"count", "extra"}
	}
	ks := owner.keyed
	ks.hotBytes = budget
	want := map[string][2][]byte{} // user key → its two states (nil: none)
	write := func(from, to int, base uint64) {
		var batch []statesvc.KV
		for i := from; i < to; i++ {
			k := fmt.Appendf(nil, "key-%d", i)
			st := want[string(k)]
			st[0] = binary.LittleEndian.AppendUint64(nil, base+uint64(i))
			batch = append(batch, statesvc.KV{Key: ks.stateKey("count", k), Value: st[0]})
			if i%3 == 0 { // a second state for a third of the keys
				st[1] = binary.LittleEndian.AppendUint64(nil, 2*base+uint64(i))
				batch = append(batch, statesvc.KV{Key: ks.stateKey("extra", k), Value: st[1]})
			}
			want[string(k)] = st
		}
		if err := ks.store.MultiPut(batch); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < keys; i += 1000 {
		write(i, i+1000, 0)
	}
	// Written back: clean entries, some on disk only once evicted.
	if err := ks.store.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
		t.Fatal(err)
	}
	write(0, hot, 1_000_000) // the hot keys, written last
	var moved []int
	for b := pushBuckets / 2; b < pushBuckets; b++ {
		moved = append(moved, b)
	}
	isMoved := func(k string) bool { return statesvc.BucketOf([]byte(k), pushBuckets) >= pushBuckets/2 }
	me := control.TaskRef{ID: owner.id, WorkerID: "w1"}
	target := control.TaskRef{ID: gainer.id, WorkerID: "w1"}
	entries, err := ks.localEntries(moved, me, handoffKeys{})
	if err != nil {
		t.Fatal(err)
	}
	var sentKeys, sentBytes int
	sendAndApply(t, gainer, func() error {
		f := &wire.Frame{Kind: wire.FrameKLT, JobID: owner.jobID, FromTask: owner.id, ToTask: gainer.id, BarrierID: "r1", Records: entries}
		if err := owner.w.deliver(context.Background(), target, f); err != nil {
			return err
		}
		var err error
		sentKeys, sentBytes, err = owner.pushHot(context.Background(), target, moved, me, "r1")
		return err
	})
	movedKeys := 0
	for k := range want {
		if isMoved(k) {
			movedKeys++
		}
	}
	if budget == 0 {
		if sentKeys != 0 || sentBytes != 0 {
			t.Fatalf("budget 0 sent %d keys (%d bytes)", sentKeys, sentBytes)
		}
	} else {
		if sentKeys == 0 || sentKeys >= movedKeys {
			t.Fatalf("sent %d of the %d keys of the moving buckets, want some, not all", sentKeys, movedKeys)
		}
		if sentBytes > budget+256 {
			t.Fatalf("sent %d bytes, budget %d", sentBytes, budget)
		}
	}
	if got, wantLen := gainer.keyed.klt.Len(), movedKeys-sentKeys; got != wantLen {
		t.Fatalf("new owner's table has %d entries, want %d (%d keys moving, %d sent)", got, wantLen, movedKeys, sentKeys)
	}
	var onGainer int
	for k, st := range want {
		user := []byte(k)
		var on [2][2][]byte
		for ti, tk := range []*task{owner, gainer} {
			got, err := tk.keyed.store.MultiGet([][]byte{tk.keyed.stateKey("count", user), tk.keyed.stateKey("extra", user)})
			if err != nil {
				t.Fatal(err)
			}
			on[ti] = [2][]byte{got[0], got[1]}
		}
		held := [2]bool{on[0][0] != nil || on[0][1] != nil, on[1][0] != nil || on[1][1] != nil}
		if held[0] == held[1] {
			t.Fatalf("key %s held by the old owner %v, the new one %v: want exactly one", k, held[0], held[1])
		}
		ti := 0
		if held[1] {
			ti, onGainer = 1, onGainer+1
			if !isMoved(k) {
				t.Fatalf("key %s of a bucket not moving was sent", k)
			}
		} else if isMoved(k) {
			if o, ok := gainer.keyed.klt.Lookup(user); !ok || o != "count-0" {
				t.Fatalf("key %s still on the old owner, but the new one's table says %q, %v", k, o, ok)
			}
		}
		for si := range 2 {
			if !bytes.Equal(on[ti][si], st[si]) {
				t.Fatalf("key %s state %d: %x, want %x", k, si, on[ti][si], st[si])
			}
		}
	}
	if onGainer != sentKeys {
		t.Fatalf("the new owner holds %d keys, %d were sent", onGainer, sentKeys)
	}
	if budget > 0 {
		for i := range hot { // written last: sent first
			if k := fmt.Sprintf("key-%d", i); isMoved(k) {
				if got, _ := gainer.keyed.store.MultiGet([][]byte{gainer.keyed.stateKey("count", []byte(k))}); got[0] == nil {
					t.Fatalf("hot key %s was not sent", k)
				}
			}
		}
	}
}
