package exchange

import (
	"bytes"
	"google.golang.org/grpc/mem"
	"reflect"
	"testing"

	"koala/dataplane/wire"
)

func TestFetchMessagesRoundTrip(t *testing.T) {
	req := &FetchRequest{JobID: "j", Task: "counter-1", Keys: [][]byte{[]byte("a"), {}, []byte("c")}, After: "cp-000007"}
	got, err := DecodeFetchRequest(AppendFetchRequest(nil, req))
	if err != nil || got.JobID != "j" || got.Task != "counter-1" || len(got.Keys) != 3 || string(got.Keys[2]) != "c" || got.After != "cp-000007" {
		t.Fatalf("fetch request round trip: %+v, %v", got, err)
	}
	pull := &FetchRequest{JobID: "j", Task: "counter-1", Bucket: 77, Limit: 4096}
	if got, err := DecodeFetchRequest(AppendFetchRequest(nil, pull)); err != nil || got.Bucket != 77 || got.Limit != 4096 || len(got.Keys) != 0 || got.After != "" {
		t.Fatalf("bucket pull round trip: %+v, %v", got, err)
	}
	for name, bad := range map[string]*FetchRequest{
		"bucket": {Bucket: 1 << 16},
		"limit":  {Limit: wire.MaxFrameRecords + 1},
	} {
		if _, err := DecodeFetchRequest(AppendFetchRequest(nil, bad)); err == nil {
			t.Errorf("fetch request with a bad %s decoded", name)
		}
	}
	rep := &FetchReply{Values: [][]byte{nil, {}, []byte("v")}, Keys: [][]byte{[]byte("k")}}
	gotRep, err := DecodeFetchReply(AppendFetchReply(nil, rep))
	if err != nil || len(gotRep.Values) != 3 || gotRep.Values[0] != nil || gotRep.Values[1] == nil || string(gotRep.Values[2]) != "v" || len(gotRep.Keys) != 1 || string(gotRep.Keys[0]) != "k" {
		t.Fatalf("fetch reply round trip keeps nil and empty apart: %+v, %v", gotRep, err)
	}
}

// A bucket pull's byte bound and the reply's More flag survive the codec,
// and a bound above the message limit is refused.
func TestFetchPullBoundsRoundTrip(t *testing.T) {
	req := &FetchRequest{JobID: "j", Task: "t", Bucket: 3, Limit: 100, MaxBytes: 1 << 20}
	got, err := DecodeFetchRequest(AppendFetchRequest(nil, req))
	if err != nil || got.MaxBytes != 1<<20 || got.Limit != 100 || got.Bucket != 3 {
		t.Fatalf("pull bounds round trip: %+v, %v", got, err)
	}
	if _, err := DecodeFetchRequest(AppendFetchRequest(nil, &FetchRequest{Limit: 1, MaxBytes: maxMessageBytes + 1})); err == nil {
		t.Error("a pull above the message limit decoded")
	}
	for _, more := range []bool{false, true} {
		rep, err := DecodeFetchReply(AppendFetchReply(nil, &FetchReply{Keys: [][]byte{[]byte("k")}, Values: [][]byte{[]byte("v")}, More: more}))
		if err != nil || rep.More != more {
			t.Errorf("reply More=%v round trip: %+v, %v", more, rep, err)
		}
	}
}

// A pull's resume key and mode, and the reply's next key, survive the
// codec; modes that do not fit the request's kind are refused.
func TestFetchResumeAndModeRoundTrip(t *testing.T) {
	req := &FetchRequest{JobID: "j", Task: "t", Bucket: 3, Limit: 100, From: []byte("op\x00\x03count\x00k17"), Mode: FetchPeek}
	got, err := DecodeFetchRequest(AppendFetchRequest(nil, req))
	if err != nil || string(got.From) != string(req.From) || got.Mode != FetchPeek {
		t.Fatalf("peek round trip: %+v, %v", got, err)
	}
	drop := &FetchRequest{JobID: "j", Task: "t", Keys: [][]byte{[]byte("a")}, Mode: FetchDrop, After: "cp-000002"}
	if got, err := DecodeFetchRequest(AppendFetchRequest(nil, drop)); err != nil || got.Mode != FetchDrop || got.From != nil || got.After != "cp-000002" {
		t.Fatalf("drop round trip: %+v, %v", got, err)
	}
	for name, bad := range map[string]*FetchRequest{
		"unknown mode": {Mode: FetchDrop + 1},
		"keyed peek":   {Keys: [][]byte{[]byte("a")}, Mode: FetchPeek},
		"bucket drop":  {Bucket: 1, Limit: 10, Mode: FetchDrop},
	} {
		if _, err := DecodeFetchRequest(AppendFetchRequest(nil, bad)); err == nil {
			t.Errorf("%s decoded", name)
		}
	}
	for _, next := range [][]byte{nil, []byte("op\x00\x03count\x00k99")} {
		rep, err := DecodeFetchReply(AppendFetchReply(nil, &FetchReply{Keys: [][]byte{[]byte("k")}, Values: [][]byte{[]byte("v")}, More: next != nil, Next: next}))
		if err != nil || string(rep.Next) != string(next) || (rep.Next == nil) != (next == nil) {
			t.Errorf("reply Next=%q round trip: %+v, %v", next, rep, err)
		}
	}
}

// FetchReplySize is exact, and a reply decoded by the codec from gRPC's
// buffers (one or several) keeps nothing of them: gRPC reuses them once
// Unmarshal returns.
func TestFetchReplySizeAndCodecCopies(t *testing.T) {
	big := bytes.Repeat([]byte("v"), 300)
	for _, rep := range []*FetchReply{
		{},
		{Values: [][]byte{nil, {}, big}, Keys: [][]byte{[]byte("k")}},
		{Values: [][]byte{big, big}, Keys: [][]byte{[]byte("a"), []byte("b")}, More: true, Next: bytes.Repeat([]byte("n"), 200)},
	} {
		enc := AppendFetchReply(nil, rep)
		if got := FetchReplySize(rep); got != len(enc) {
			t.Fatalf("FetchReplySize = %d, encoding has %d bytes", got, len(enc))
		}
		for _, parts := range []int{1, 3} {
			src := bytes.Clone(enc)
			var msg mem.BufferSlice
			step := (len(src) + parts - 1) / parts
			for i := 0; i < len(src); i += step {
				msg = append(msg, mem.SliceBuffer(src[i:min(i+step, len(src))]))
			}
			var got FetchReply
			if err := (codec{}).Unmarshal(msg, &got); err != nil {
				t.Fatal(err)
			}
			clear(src) // gRPC reuses its buffers
			want, _ := DecodeFetchReply(enc)
			if !reflect.DeepEqual(&got, want) || (len(rep.Values) > 2 && !bytes.Equal(got.Values[2], big)) {
				t.Fatalf("%d part(s): decoded %+v, want %+v", parts, got, want)
			}
		}
	}
}
