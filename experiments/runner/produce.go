package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Produce runs the request's share on each of n producers at once in this
// process, printing their summed progress every tick of the first one.
func Produce(ctx context.Context, req control.ProduceRequest, n int) error {
	shares := produce.SplitProduce(req, n)
	reports := make([]control.ProduceReport, len(shares))
	errs := make([]error, len(shares))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, share := range shares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := produce.Produce(ctx, share, nil, func(r control.ProduceReport) {
				mu.Lock()
				defer mu.Unlock()
				reports[i] = r
				if i == 0 {
					sum := sumReports(reports)
					fmt.Fprintf(os.Stderr, "  %6.0fs acked %d failed %d\n", r.ElapsedSecs, sum.Acked, sum.Failed)
				}
			})
			mu.Lock()
			reports[i], errs[i] = rep, err
			mu.Unlock()
		}()
	}
	wg.Wait()
	sum := sumReports(reports)
	fmt.Printf("produced %d records to %s (%d failed) in %.1fs with %d producer(s)\n", sum.Acked, req.Topic, sum.Failed, sum.ElapsedSecs, len(shares))
	if sum.Malformed > 0 {
		fmt.Printf("skipped %d malformed input lines\n", sum.Malformed)
	}
	return errors.Join(errs...)
}

func sumReports(reps []control.ProduceReport) control.ProduceReport {
	var sum control.ProduceReport
	for _, r := range reps {
		sum.Acked += r.Acked
		sum.Failed += r.Failed
		sum.Malformed += r.Malformed
		sum.ElapsedSecs = max(sum.ElapsedSecs, r.ElapsedSecs)
	}
	return sum
}
