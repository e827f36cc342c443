package exchange

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"koala/dataplane/wire"
)

// TestPeerQueueBoundedInBytes fills a Peer whose stream is not running:
// it takes frames while less than its byte bound is queued, far fewer
// than its frame bound, then makes the sender wait; once the stream runs
// and sends them, the waiting sender gets through and every frame
// arrives, in order.
func TestPeerQueueBoundedInBytes(t *testing.T) {
	big := func(i int) *wire.Frame {
		return &wire.Frame{Kind: wire.FrameData, JobID: "j", FromTask: "a", ToTask: "b",
			Records: []wire.Record{{Key: []byte("k"), Value: make([]byte, 10<<10), Offset: int64(i)}}}
	}
	size := wire.FrameSize(big(0))
	recv := &recvFrames{}
	addr := serve(t, recv, nil)

	const frames, admitted = 256, 3
	p := newPeer(addr, nil, slog.New(slog.DiscardHandler), frames, (admitted-1)*size+1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range admitted {
		if err := p.Send(ctx, big(i)); err != nil {
			t.Fatalf("frame %d of the first %d: %v", i, admitted, err)
		}
	}
	// A sender that would wait gives up at once with a done context.
	done, stop := context.WithCancel(ctx)
	stop()
	if err := p.Send(done, big(admitted)); !errors.Is(err, context.Canceled) {
		t.Fatalf("frame %d with %d bytes queued (bound %d): %v, want it to wait", admitted, p.bytes.Used(), p.bytes.Limit(), err)
	}
	if n := len(p.queue); n != admitted {
		t.Fatalf("%d frames queued, want %d", n, admitted)
	}

	sent := make(chan error, 1)
	go func() { sent <- p.Send(ctx, big(admitted)) }()
	go p.run(ctx)
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting sender never got room")
	}
	for recv.count() < admitted+1 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d frames arrived", recv.count(), admitted+1)
		case <-time.After(5 * time.Millisecond):
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i, f := range recv.frames {
		if f.Records[0].Offset != int64(i) {
			t.Fatalf("frame %d arrived carrying offset %d", i, f.Records[0].Offset)
		}
	}
}
