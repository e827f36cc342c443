package statesvc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// nsKeys are state keys of operator "count" over buckets 0..nb-1, the same
// in every namespace.
func nsKeys(nb int) [][]byte {
	var keys [][]byte
	for b := 0; b < nb; b++ {
		for _, u := range []string{"k1", "k2"} {
			keys = append(keys, StateKey(nil, "count", b, "n", []byte(fmt.Sprintf("%s-%d", u, b))))
		}
	}
	return keys
}

// nsScan lists a store's keys and values in [start, end).
func nsScan(t *testing.T, s Store, start, end []byte) (keys []string, vals []string) {
	t.Helper()
	if err := s.Scan(start, end, func(k, v []byte) bool {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return true
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return keys, vals
}

// TestRemoteNamespacesAreIsolated writes the same keys from two namespaces
// (one a string prefix of the other) to the same servers and checks each
// sees only its own values through MultiGet, Scan and DeleteRange, and that
// dropping one namespace leaves the other intact.
func TestRemoteNamespacesAreIsolated(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("servers-%d", servers), func(t *testing.T) {
			addrs := startServers(t, servers)
			a := mustOpenRemote(t, addrs, RemoteOptions{Namespace: "job-1", ScanPagePairs: 3})
			b := mustOpenRemote(t, addrs, RemoteOptions{Namespace: "job-10", ScanPagePairs: 3})
			const nb = 8
			keys := nsKeys(nb)
			put := func(s *Remote, val string) {
				kvs := make([]KV, len(keys))
				for i, k := range keys {
					kvs[i] = KV{Key: k, Value: []byte(val + string(k[len(k)-1]))}
				}
				if err := s.MultiPut(kvs); err != nil {
					t.Fatalf("%s MultiPut: %v", s.Namespace(), err)
				}
			}
			put(a, "a")
			put(b, "b")
			onlyB := StateKey(nil, "count", 3, "n", []byte("only-b"))
			if err := b.MultiPut([]KV{{onlyB, []byte("b!")}}); err != nil {
				t.Fatal(err)
			}

			for _, c := range []struct {
				s    *Remote
				val  string
				more int // keys beyond keys
			}{{a, "a", 0}, {b, "b", 1}} {
				got, err := c.s.MultiGet(append(append([][]byte{}, keys...), onlyB))
				if err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					if want := c.val + string(k[len(k)-1]); string(got[i]) != want {
						t.Fatalf("%s: MultiGet %q = %q, want %q", c.s.Namespace(), k, got[i], want)
					}
				}
				if hasB := got[len(keys)] != nil; hasB != (c.more == 1) {
					t.Fatalf("%s: MultiGet of the key only job-10 wrote = %q", c.s.Namespace(), got[len(keys)])
				}
				ks, vs := nsScan(t, c.s, nil, nil)
				if len(ks) != len(keys)+c.more {
					t.Fatalf("%s: full scan saw %d keys, want %d: %q", c.s.Namespace(), len(ks), len(keys)+c.more, ks)
				}
				for i, k := range ks {
					if _, _, _, _, err := ParseStateKey([]byte(k)); err != nil {
						t.Fatalf("%s: scan returned a key that is not an unprefixed state key: %q: %v", c.s.Namespace(), k, err)
					}
					if !strings.HasPrefix(vs[i], c.val) {
						t.Fatalf("%s: scan saw %q = %q from another namespace", c.s.Namespace(), k, vs[i])
					}
				}
				start, end := BucketRange("count", 2, 4)
				if ks, _ := nsScan(t, c.s, start, end); len(ks) != 4+c.more {
					t.Fatalf("%s: scan of buckets 2..3 saw %q", c.s.Namespace(), ks)
				}
			}

			// A range delete in one namespace leaves the same range of the other.
			start, end := BucketRange("count", 0, 4)
			if err := a.DeleteRange(start, end); err != nil {
				t.Fatal(err)
			}
			if ks, _ := nsScan(t, a, nil, nil); len(ks) != len(keys)/2 {
				t.Fatalf("job-1 after deleting buckets 0..3: %d keys, want %d", len(ks), len(keys)/2)
			}
			if ks, _ := nsScan(t, b, nil, nil); len(ks) != len(keys)+1 {
				t.Fatalf("job-10 after job-1 deleted buckets 0..3: %d keys, want %d", len(ks), len(keys)+1)
			}

			// Dropping a namespace removes all of it and nothing of the other.
			if err := a.DropNamespace(); err != nil {
				t.Fatal(err)
			}
			if ks, _ := nsScan(t, a, nil, nil); len(ks) != 0 {
				t.Fatalf("job-1 after DropNamespace: %q", ks)
			}
			if ks, vs := nsScan(t, b, nil, nil); len(ks) != len(keys)+1 || vs[0][0] != 'b' {
				t.Fatalf("job-10 after job-1 was dropped: %d keys, want %d", len(ks), len(keys)+1)
			}

			// On the servers every key carries its namespace's prefix: a raw
			// view (no prefix) sees only job-10's prefixed keys now.
			raw := mustOpenRemote(t, addrs, RemoteOptions{})
			raw.prefix = nil
			rk, _ := nsScan(t, raw, nil, nil)
			if len(rk) != len(keys)+1 {
				t.Fatalf("raw view: %d keys, want %d", len(rk), len(keys)+1)
			}
			for _, k := range rk {
				if !bytes.HasPrefix([]byte(k), namespacePrefix("job-10")) {
					t.Fatalf("raw key %q lacks job-10's prefix", k)
				}
			}
		})
	}
}

// TestRemoteNamespaceKeepsPlacement checks a bucket's keys live on server
// bucket mod n whatever the namespace: a client of that server alone finds
// them, so per-bucket scans still hit one server.
func TestRemoteNamespaceKeepsPlacement(t *testing.T) {
	addrs := startServers(t, 3)
	all := mustOpenRemote(t, addrs, RemoteOptions{Namespace: "placed"})
	keys := nsKeys(6)
	kvs := make([]KV, len(keys))
	for i, k := range keys {
		kvs[i] = KV{Key: k, Value: []byte{byte(i)}}
	}
	if err := all.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	for s, addr := range addrs {
		one := mustOpenRemote(t, []string{addr}, RemoteOptions{Namespace: "placed"})
		got, err := one.MultiGet(keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			b, _ := keyBucket(k)
			if (got[i] != nil) != (b%3 == s) {
				t.Fatalf("key of bucket %d on server %d: %v (want it only on server %d)", b, s, got[i], b%3)
			}
		}
		start, end := BucketRange("count", s, s+1)
		if got := all.scanShards(start, end); len(got) != 1 || got[0] != s {
			t.Fatalf("scan of bucket %d goes to servers %v, want [%d]", s, got, s)
		}
	}
}

func TestRemoteNamespaceRequired(t *testing.T) {
	addrs := []string{"127.0.0.1:7600"}
	if _, err := OpenRemote(addrs, RemoteOptions{}); err == nil || !strings.Contains(err.Error(), "RemoteOptions.Namespace") {
		t.Fatalf("OpenRemote without namespace: %v", err)
	}
	if _, err := Open(Options{Backend: BackendRemotePebble, Addrs: addrs}); err == nil || !strings.Contains(err.Error(), "Options.Namespace") {
		t.Fatalf("Open remote-pebble without namespace: %v", err)
	}
	// Namespaces are prefix-free even when the names are string prefixes.
	for _, pair := range [][2]string{{"job-1", "job-10"}, {"a", "a\x00"}, {strings.Repeat("x", 127), strings.Repeat("x", 128)}} {
		p, q := namespacePrefix(pair[0]), namespacePrefix(pair[1])
		if bytes.HasPrefix(q, p) || bytes.HasPrefix(p, q) {
			t.Fatalf("prefixes of %q and %q overlap: %x, %x", pair[0], pair[1], p, q)
		}
	}
}
