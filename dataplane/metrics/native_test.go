package metrics

import (
	"context"
	"strings"
	"testing"
)

func TestCheckNativeAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:9000", "clickhouse.internal:9440", "[::1]:9000"} {
		if err := CheckNativeAddr(ok); err != nil {
			t.Errorf("CheckNativeAddr(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "127.0.0.1", ":9000", "host:0", "host:70000", "host:tcp", "http://127.0.0.1:9000"} {
		err := CheckNativeAddr(bad)
		if err == nil || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("CheckNativeAddr(%q) = %v, want an error saying host:port", bad, err)
		}
	}
}

// TestBadNativeAddrOnlyMattersForReads: inserts go over HTTP and work
// without a native address; DDL and SELECTs report the bad address.
func TestBadNativeAddrOnlyMattersForReads(t *testing.T) {
	f := newFake(t)
	ch := NewClickHouse(f.srv.URL, "", "koala")
	ctx := context.Background()
	ch.RecordTask(TaskRow{Time: t0, Task: "a"})
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.next(t)
	if err := ch.EnsureSchema(ctx); err == nil || !strings.Contains(err.Error(), "native") {
		t.Fatalf("EnsureSchema without native address: %v", err)
	}
	if _, err := ch.JobStart(ctx, "j"); err == nil || !strings.Contains(err.Error(), "native") {
		t.Fatalf("JobStart without native address: %v", err)
	}
	f.none(t) // nothing fell back to HTTP
	if err := ch.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
