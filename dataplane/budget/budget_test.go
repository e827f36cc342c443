package budget

import (
	"context"
	"errors"
	"testing"
	"time"
)

// closed is a stop channel that has fired: an Acquire given it returns at
// once when it would wait, which shows whether it would have.
func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func TestAdmitsBelowLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		held  []int // acquired in order, each must be admitted
		next  int
		admit bool // whether next is admitted without waiting
	}{
		{"empty admits", 10, nil, 3, true},
		{"below the limit admits", 10, []int{4, 5}, 3, true},
		{"at the limit waits", 10, []int{4, 6}, 1, false},
		{"over the limit waits", 10, []int{9, 5}, 1, false},
		{"larger than the limit passes alone", 10, nil, 50, true},
		{"after a large one, waits", 10, []int{50}, 1, false},
		{"a zero limit is one item at a time", 0, []int{1}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.limit)
			for _, n := range tc.held {
				ok, err := b.Acquire(context.Background(), n, closed())
				if err != nil || !ok {
					t.Fatalf("acquire %d of held %v: ok %v err %v", n, tc.held, ok, err)
				}
			}
			ok, err := b.Acquire(context.Background(), tc.next, closed())
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.admit {
				t.Fatalf("acquire %d with %d of %d used: admitted %v, want %v", tc.next, b.Used()-map[bool]int{true: tc.next}[ok], b.Limit(), ok, tc.admit)
			}
		})
	}
}

func TestReleaseWakesWaiters(t *testing.T) {
	b := New(2)
	if ok, _ := b.Acquire(context.Background(), 2, nil); !ok {
		t.Fatal("first acquire refused")
	}
	done := make(chan bool, 2)
	for range 2 {
		go func() {
			ok, err := b.Acquire(context.Background(), 1, nil)
			done <- ok && err == nil
		}()
	}
	deadline := time.After(10 * time.Second)
	for b.Waiting() < 2 {
		select {
		case <-deadline:
			t.Fatalf("%d of 2 acquires waiting", b.Waiting())
		case <-time.After(time.Millisecond):
		}
	}
	// Each release of 1 lowers used to 1, which admits one waiter.
	for i := range 2 {
		b.Release(1)
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("a woken acquire failed")
			}
		case <-deadline:
			t.Fatalf("release %d admitted no waiter; used %d, %d waiting", i+1, b.Used(), b.Waiting())
		}
	}
	if got := b.Used(); got != 2 {
		t.Fatalf("used %d, want 2", got)
	}
}

func TestAcquireEndsWithContext(t *testing.T) {
	b := New(1)
	if ok, _ := b.Acquire(context.Background(), 1, nil); !ok {
		t.Fatal("first acquire refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, err := b.Acquire(ctx, 1, nil)
	if ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after cancel: ok %v err %v, want context.Canceled", ok, err)
	}
	if got := b.Used(); got != 1 {
		t.Fatalf("a refused acquire changed used to %d", got)
	}
}

func TestReleaseNeverBelowZero(t *testing.T) {
	b := New(1)
	b.Release(5)
	if got := b.Used(); got != 0 {
		t.Fatalf("used %d after an unmatched release, want 0", got)
	}
	if ok, _ := b.Acquire(context.Background(), 1, closed()); !ok {
		t.Fatal("an empty budget refused an item")
	}
}
