package statesvc

import "testing"

func TestStallClock(t *testing.T) {
	var c stallClock
	if d := c.end(); d != 0 {
		t.Fatalf("an end with no begin lasted %v, want 0", d)
	}
	c.begin()
	if d := c.end(); d <= 0 {
		t.Fatalf("a stall lasted %v, want more than 0", d)
	}
	if d := c.end(); d != 0 {
		t.Fatalf("a second end for one begin lasted %v, want 0", d)
	}
}
