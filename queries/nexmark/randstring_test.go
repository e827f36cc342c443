package nexmark

import (
	"math/rand/v2"
	"testing"
)

// randString takes several letters from each draw; at every position of a
// draw every letter must be about as frequent as any other (a letter taken
// from a word whose bits have run out is always 'a': with 64 letters per
// draw, the last eight positions fail), and strings of one length must
// differ.
func TestRandStringLettersUniform(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	var counts [lettersPerDraw][26]int
	seen := map[string]bool{}
	for range n {
		s := randString(rng, lettersPerDraw+3)
		if len(s) != lettersPerDraw+3 {
			t.Fatalf("len %d, want %d", len(s), lettersPerDraw+3)
		}
		seen[s] = true
		for i := range lettersPerDraw {
			c := s[i]
			if c < 'a' || c > 'z' {
				t.Fatalf("byte %q is not a lowercase letter", c)
			}
			counts[i][c-'a']++
		}
	}
	if len(seen) < n-1 {
		t.Errorf("%d distinct strings of %d", len(seen), n)
	}
	// Chi-square with 25 degrees of freedom: 52.6 is its 0.999 quantile.
	want := float64(n) / 26
	for pos, row := range counts {
		chi := 0.0
		for _, c := range row {
			d := float64(c) - want
			chi += d * d / want
		}
		if chi > 52.6 {
			t.Errorf("position %d of a draw: chi-square %.1f over 26 letters, want ≤ 52.6 (counts %v)", pos, chi, row)
		}
	}
	if s := randString(rng, 0); s != "" {
		t.Errorf("randString(0) = %q", s)
	}
}
