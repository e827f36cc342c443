package statesvc

import (
	"fmt"
	"os"
)

// ImportCheckpoint copies every key of the Pebble checkpoint in src into
// dst. It is how a store with no directory of its own (a remote-pebble
// namespace, memory) loads a warm-up snapshot: the checkpoint is restored
// into scratch (hard links, so src stays usable for the next load; scratch
// must be absent or empty and is removed at the end), opened there, and
// its keys are written to dst in MultiPut batches of about batchBytes.
// It returns the keys and the bytes (keys plus values) written.
func ImportCheckpoint(src, scratch string, dst Store, batchBytes int) (keys, bytes int64, err error) {
	if batchBytes <= 0 {
		return 0, 0, fmt.Errorf("statesvc: import checkpoint %s: batch of %d bytes, want > 0", src, batchBytes)
	}
	if err := RestoreCheckpoint(src, scratch); err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(scratch)
	from, err := OpenPebble(Options{Backend: BackendPebble, Dir: scratch, Volatile: true})
	if err != nil {
		return 0, 0, fmt.Errorf("statesvc: import checkpoint %s: %w", src, err)
	}
	defer from.Close()

	var (
		batch    []KV
		pending  int
		writeErr error
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.MultiPut(batch); err != nil {
			return err
		}
		keys += int64(len(batch))
		bytes += int64(pending)
		batch, pending = batch[:0], 0
		return nil
	}
	err = from.Scan(nil, nil, func(k, v []byte) bool {
		// Scan's slices are valid only during the call.
		batch = append(batch, KV{Key: append([]byte(nil), k...), Value: append([]byte{}, v...)})
		pending += len(k) + len(v)
		if pending >= batchBytes {
			writeErr = flush()
		}
		return writeErr == nil
	})
	if err == nil {
		err = writeErr
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return keys, bytes, fmt.Errorf("statesvc: import checkpoint %s (%d keys written): %w", src, keys, err)
	}
	return keys, bytes, nil
}
