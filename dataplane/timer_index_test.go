package dataplane

import (
	"fmt"
	"reflect"
	"testing"
)

func TestTimerIndex(t *testing.T) {
	var x TimerIndex
	for _, tm := range []int64{30, 10, 20, 10, 40} {
		x.Add(tm, []byte(fmt.Sprint("k", tm)))
	}
	x.Add(20, []byte("k10"))
	x.Add(5, []byte("k5")) // out of order: inserted before 10
	var keys []string
	for _, k := range x.PopDue(20) {
		keys = append(keys, string(k))
	}
	// k10 has timers at 10 and 20 and comes once; keys come sorted.
	if !reflect.DeepEqual(keys, []string{"k10", "k20", "k5"}) || x.Len() != 2 {
		t.Fatalf("due at 20: %v (left %d)", keys, x.Len())
	}
	if got := x.PopDue(35); len(got) != 1 || string(got[0]) != "k30" || x.Len() != 1 {
		t.Fatalf("due at 35: %q, %d left", got, x.Len())
	}
	x.Reset()
	if got := x.PopDue(MaxWatermark); len(got) != 0 || x.Len() != 0 {
		t.Fatalf("after reset: %d keys, %d left", len(got), x.Len())
	}
}
