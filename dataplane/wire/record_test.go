package wire

import (
	"bytes"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	cases := []*Frame{
		{Kind: FrameData, JobID: "j", FromTask: "source-0", ToTask: "mapper-1", Seq: 1_700_000_000_000_000_123, Records: []Record{
			{Key: []byte("k1"), Value: []byte("v"), EventTime: 1, Partition: 3, Offset: 42},
			{Key: nil, Value: []byte{}, EventTime: -5, Partition: 0, Offset: -1},
		}},
		{Kind: FrameBarrier, JobID: "j", FromTask: "a", ToTask: "b", BarrierID: "reconfig-1"},
		{Kind: FrameEOS, BarrierID: "eos"},
		{Kind: FrameKLT, Records: []Record{{Key: []byte("k"), Value: []byte("owner\x00w1\x00127.0.0.1:1"), Offset: -1}}},
		{Kind: FrameRouteBarrier, BarrierID: "r"},
		{Kind: FrameCredit, JobID: "j", FromTask: "mapper-1", ToTask: "source-0", Seq: 42},
		{Kind: FrameHandedOff, JobID: "j", FromTask: "agg-0", ToTask: "sink-0", Records: []Record{{Key: []byte("epoch"), Offset: 7}}},
		{Kind: FrameOrderAfter, JobID: "j", FromTask: "agg-2", ToTask: "sink-0", Records: []Record{{Key: []byte("agg-0"), Offset: 7}}},
	}
	for _, want := range cases {
		got, err := DecodeFrame(AppendFrame(nil, want))
		if err != nil {
			t.Fatalf("%v: %v", want.Kind, err)
		}
		if got.Kind != want.Kind || got.JobID != want.JobID || got.FromTask != want.FromTask || got.ToTask != want.ToTask || got.BarrierID != want.BarrierID || got.Seq != want.Seq || len(got.Records) != len(want.Records) {
			t.Fatalf("round trip of %v frame: got %+v", want.Kind, got)
		}
		for i := range want.Records {
			w, g := want.Records[i], got.Records[i]
			if !bytes.Equal(w.Key, g.Key) || !bytes.Equal(w.Value, g.Value) || w.EventTime != g.EventTime || w.Partition != g.Partition || w.Offset != g.Offset {
				t.Fatalf("record %d: got %+v want %+v", i, g, w)
			}
		}
	}
}

func TestDecodeFrameRejectsBadInput(t *testing.T) {
	good := AppendFrame(nil, &Frame{Kind: FrameData, Records: []Record{{Key: []byte("k"), Value: []byte("v")}}})
	cases := map[string][]byte{
		"empty":             nil,
		"unknown kind":      append([]byte{99}, good[1:]...),
		"internal kind":     append([]byte{byte(FrameControl)}, good[1:]...),
		"truncated":         good[:len(good)-2],
		"trailing bytes":    append(append([]byte(nil), good...), 0),
		"huge record count": {byte(FrameData), 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, data := range cases {
		if _, err := DecodeFrame(data); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// FuzzDecodeFrame checks that arbitrary bytes never crash the decoder and
// that whatever decodes re-encodes to the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, &Frame{Kind: FrameData, JobID: "j", Records: []Record{{Key: []byte("k"), Value: []byte("v"), Offset: 7}}}))
	f.Add(AppendFrame(nil, &Frame{Kind: FrameBarrier, BarrierID: "b"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeFrame(data)
		if err != nil {
			return
		}
		if again := AppendFrame(nil, fr); !bytes.Equal(again, data) {
			// Varints have one canonical form per value; non-canonical input may
			// decode, but re-encoding must then decode to the same frame.
			fr2, err := DecodeFrame(again)
			if err != nil || fr2.Kind != fr.Kind || len(fr2.Records) != len(fr.Records) {
				t.Fatalf("re-encoded frame does not decode the same: %v", err)
			}
		}
	})
}

// FrameSize is exact, so the exchange encodes into a buffer it never grows.
func TestFrameSizeMatchesEncoding(t *testing.T) {
	big := make([]byte, 300)
	for _, f := range []*Frame{
		{Kind: FrameBarrier, JobID: "j", FromTask: "a-0", ToTask: "b-1", BarrierID: "bar"},
		{Kind: FrameData},
		{Kind: FrameCredit, FromTask: "map-0", ToTask: "src-0", Seq: 1<<64 - 1},
		{Kind: FrameData, JobID: "job", FromTask: "src-0", ToTask: "map-0", Seq: 300, Records: []Record{
			{Key: []byte("k"), Value: nil, EventTime: 0, Partition: 0, Offset: 0},
			{Key: big, Value: big[:128], EventTime: -1, Partition: -1, Offset: -1},
			{Key: []byte("k0000001"), Value: []byte("v"), EventTime: 1<<63 - 1, Partition: 1<<31 - 1, Offset: -1 << 63},
			{EventTime: 63, Partition: 64, Offset: 8191},
		}},
	} {
		if got, want := FrameSize(f), len(AppendFrame(nil, f)); got != want {
			t.Errorf("FrameSize(%v frame with %d records) = %d, encoding has %d bytes", f.Kind, len(f.Records), got, want)
		}
	}
}

// The frame buffer pool hands out buffers of the asked length and takes
// back only buffers of its own classes.
func TestFrameBufPool(t *testing.T) {
	var p FrameBufPool
	for _, n := range []int{0, 1, 1023, 1024, 1025, 70000} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		p.Put(b)
	}
	odd := make([]byte, 0, 3000)
	p.Put(&odd) // not a power of two: dropped, not handed out again
	if b := p.Get(2048); cap(*b) != 2048 {
		t.Fatalf("Get(2048) returned cap %d, want 2048", cap(*b))
	}
}
