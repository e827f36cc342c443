package dataplane

import (
	"testing"
	"time"

	"koala/dataplane/control"
)

// The returner's queue keeps the newest acknowledgement per source and
// receiving task, and repeats a sent one for creditResendFor, then forgets it.
func TestCreditReturnsQueue(t *testing.T) {
	var c creditReturns
	k1 := creditKey{job: "j", source: "source-0", from: "map-0"}
	k2 := creditKey{job: "j", source: "source-0", from: "map-1"}
	ref := control.TaskRef{ID: "source-0", WorkerID: "w1", DataAddr: "127.0.0.1:1"}
	c.add(k1, ref, 5)
	c.add(k1, ref, 3) // older: dropped
	c.add(k2, ref, 4)
	select {
	case <-c.signal():
	default:
		t.Fatal("no wake-up after add")
	}
	got := map[creditKey]uint64{}
	for _, a := range c.take() {
		got[a.key] = a.seq
	}
	if len(got) != 2 || got[k1] != 5 || got[k2] != 4 {
		t.Fatalf("took %v, want map-0 at 5 and map-1 at 4", got)
	}
	if left := c.take(); len(left) != 0 {
		t.Fatalf("queue not emptied: %v", left)
	}

	t0 := time.Unix(1_700_000_000, 0)
	c.sentOK(creditAck{key: k1, ref: ref, seq: 5}, t0)
	c.retry(creditAck{key: k2, ref: ref, seq: 4})                         // its send failed
	c.add(k2, ref, 2)                                                     // older than the retried one
	c.sentOK(creditAck{key: k1, ref: ref, seq: 5}, t0.Add(5*time.Second)) // a repeat does not extend the window
	c.resendRecent(t0.Add(creditResendFor - time.Second))
	got = map[creditKey]uint64{}
	for _, a := range c.take() {
		got[a.key] = a.seq
	}
	if len(got) != 2 || got[k1] != 5 || got[k2] != 4 {
		t.Fatalf("after a failed send and within the resend window took %v, want map-0 at 5 (resent) and map-1 at 4 (retried)", got)
	}
	c.resendRecent(t0.Add(creditResendFor + time.Second))
	if left := c.take(); len(left) != 0 {
		t.Fatalf("resent after the window: %v", left)
	}
	if len(c.sent) != 0 {
		t.Fatalf("sent acknowledgements kept after the window: %v", c.sent)
	}
}
