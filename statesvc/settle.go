package statesvc

import (
	"context"
	"fmt"
	"time"
)

// settlePoll is how often Settle looks at Pebble's compaction metrics.
const settlePoll = 100 * time.Millisecond

// SettleStats says what Settle waited for.
type SettleStats struct {
	Compactions int64         // compactions that ran while it waited
	DebtBefore  uint64        // Pebble's estimated compaction debt after the flush
	DebtAfter   uint64        // and when it returned
	Waited      time.Duration // from the flush to the quiet store
}

// Settle writes the buffered writes and the memtable to sstables and waits
// until Pebble has no flush or compaction running and starts none for two
// polls in a row, or ctx ends (then it returns ctx's error with the stats
// so far). A store written faster than it compacts (a warm-up loading
// gigabytes as fast as the pipeline takes them) leaves compaction debt: a
// checkpoint taken then hands that debt to every run that loads it, which
// spends its first minute compacting the warm-up's writes instead of its
// own. Settling first makes the checkpoint the state of a store that kept
// up with its writes; its contents are the same.
func (p *Pebble) Settle(ctx context.Context) (SettleStats, error) {
	var st SettleStats
	if err := p.Flush(); err != nil {
		return st, err
	}
	if err := p.enter(); err != nil {
		return st, err
	}
	defer p.exit()
	start := time.Now()
	m := p.db.Metrics()
	st.DebtBefore = m.Compact.EstimatedDebt
	first, last := m.Compact.Count, m.Compact.Count
	quiet := 0
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for {
		m = p.db.Metrics()
		st.Compactions = m.Compact.Count - first
		st.DebtAfter = m.Compact.EstimatedDebt
		st.Waited = time.Since(start)
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 && m.Compact.Count == last {
			quiet++
		} else {
			quiet = 0
		}
		last = m.Compact.Count
		if quiet >= 2 {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("statesvc: pebble settle: %d compactions in %s, debt %d bytes left: %w", st.Compactions, st.Waited.Round(time.Millisecond), st.DebtAfter, ctx.Err())
		case <-tick.C:
		}
	}
}
