package statesvc

import (
	"bytes"
	"strings"
	"testing"
)

func TestStateKeyRoundTrip(t *testing.T) {
	cases := []struct {
		name     string
		operator string
		bucket   int
		state    string
		userKey  []byte
	}{
		{"plain", "count", 7, "sum", []byte("user-42")},
		{"empty everything", "", 0, "", nil},
		{"max bucket", "op", MaxBuckets - 1, "s", []byte{0}},
		{"binary names", "a\x00b", 256, "\xff\x00", []byte{0xff, 0xff}},
		{"long names", strings.Repeat("o", 255), 1, strings.Repeat("s", 255), []byte("k")},
		{"key looks like layout", "x", 3, "y", []byte{1, 'x', 0, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := StateKey([]byte("prefix-kept"), c.operator, c.bucket, c.state, c.userKey)
			if !bytes.HasPrefix(k, []byte("prefix-kept")) {
				t.Fatalf("StateKey did not append to dst: %q", k)
			}
			k = k[len("prefix-kept"):]
			op, b, st, uk, err := ParseStateKey(k)
			if err != nil {
				t.Fatalf("ParseStateKey: %v", err)
			}
			if op != c.operator || b != c.bucket || st != c.state || !bytes.Equal(uk, c.userKey) {
				t.Fatalf("round trip got (%q,%d,%q,%q) want (%q,%d,%q,%q)", op, b, st, uk, c.operator, c.bucket, c.state, c.userKey)
			}
			if !bytes.HasPrefix(k, BucketPrefix(c.operator, c.bucket)) {
				t.Fatalf("key %q lacks bucket prefix %q", k, BucketPrefix(c.operator, c.bucket))
			}
			lo, hi := BucketRange(c.operator, c.bucket, c.bucket+1)
			if bytes.Compare(k, lo) < 0 || (hi != nil && bytes.Compare(k, hi) >= 0) {
				t.Fatalf("key %q outside its bucket range [%q, %q)", k, lo, hi)
			}
		})
	}
}

func TestBucketRangeContiguity(t *testing.T) {
	// Keys of buckets [lo, hi) of one operator are inside the range; keys of
	// other buckets or other operators (including prefix-sharing names) are not.
	ops := []string{"a", "ab", "b", "", "\xff"}
	for _, op := range ops {
		for _, r := range [][2]int{{0, 1}, {3, 9}, {0, MaxBuckets}, {MaxBuckets - 2, MaxBuckets}, {5, 5}} {
			start, end := BucketRange(op, r[0], r[1])
			for _, op2 := range ops {
				for _, b := range []int{0, 1, 3, 8, 9, MaxBuckets - 2, MaxBuckets - 1} {
					for _, st := range []string{"", "s", "\xff\xff"} {
						k := StateKey(nil, op2, b, st, []byte("\xff\xff\xff"))
						in := bytes.Compare(k, start) >= 0 && (end == nil || bytes.Compare(k, end) < 0)
						want := op2 == op && b >= r[0] && b < r[1]
						if in != want {
							t.Fatalf("BucketRange(%q,%d,%d): key of (%q,%d,%q) in=%v want %v", op, r[0], r[1], op2, b, st, in, want)
						}
					}
				}
			}
		}
	}
}

func TestParseStateKeyErrors(t *testing.T) {
	bad := [][]byte{
		nil,
		{},
		{3, 'a', 'b'},          // operator truncated
		{1, 'a', 0},            // bucket truncated
		{1, 'a', 0, 1},         // missing state length
		{1, 'a', 0, 1, 4, 's'}, // state truncated
		{255},                  // long operator, nothing else
		{0, 0, 0, 2, 'x'},      // state truncated after empty operator
	}
	for _, k := range bad {
		if _, _, _, _, err := ParseStateKey(k); err == nil {
			t.Errorf("ParseStateKey(%v) = nil error, want error", k)
		}
	}
}

func TestLayoutPanicsAndChecks(t *testing.T) {
	long := strings.Repeat("x", 256)
	if CheckName(long) == nil || CheckName("ok") != nil {
		t.Fatal("CheckName wrong")
	}
	if CheckBucket(-1) == nil || CheckBucket(MaxBuckets) == nil || CheckBucket(0) != nil {
		t.Fatal("CheckBucket wrong")
	}
	for name, f := range map[string]func(){
		"long operator":  func() { StateKey(nil, long, 0, "s", nil) },
		"long state":     func() { StateKey(nil, "o", 0, long, nil) },
		"bucket high":    func() { BucketPrefix("o", MaxBuckets) },
		"bucket neg":     func() { StateKey(nil, "o", -1, "s", nil) },
		"range inverted": func() { BucketRange("o", 5, 4) },
		"range high":     func() { BucketRange("o", 0, MaxBuckets+1) },
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
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte("ab"), []byte("ac")},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	} {
		if got := PrefixEnd(c.in); !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func FuzzParseStateKey(f *testing.F) {
	f.Add([]byte{}, "op", 3, "st", []byte("key"))
	f.Add([]byte{1, 'a', 0, 1, 0}, "", 0, "", []byte{})
	f.Add([]byte{255, 0}, strings.Repeat("x", 255), MaxBuckets-1, "y", []byte{0xff})
	f.Fuzz(func(t *testing.T, raw []byte, op string, bucket int, st string, uk []byte) {
		// Arbitrary bytes: never panics; a successful parse re-encodes to the input.
		if o, b, s, u, err := ParseStateKey(raw); err == nil {
			if again := StateKey(nil, o, b, s, u); !bytes.Equal(again, raw) {
				t.Fatalf("re-encode of %v = %v", raw, again)
			}
		}
		// Valid fields: encode then parse gives them back.
		if CheckName(op) != nil || CheckName(st) != nil {
			return
		}
		bucket = ((bucket % MaxBuckets) + MaxBuckets) % MaxBuckets
		k := StateKey(nil, op, bucket, st, uk)
		o, b, s, u, err := ParseStateKey(k)
		if err != nil || o != op || b != bucket || s != st || !bytes.Equal(u, uk) {
			t.Fatalf("round trip (%q,%d,%q,%q) -> %v -> (%q,%d,%q,%q,%v)", op, bucket, st, uk, k, o, b, s, u, err)
		}
	})
}
