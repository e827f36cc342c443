package dataplane

import (
	"context"
	"fmt"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// The worker side of input producers: a job's producers run inside
// workers (VerbProduceStart, VerbProduceStop), so their CPU is measured
// with the pipeline's.

// producerKey names one producer of a job on a worker.
func producerKey(jobID string, index int) string {
	return fmt.Sprintf("%s#%d", jobID, index)
}

func (w *Worker) startProducer(jobID string, req control.ProduceRequest) error {
	key := producerKey(jobID, req.Producer)
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.producers[key]; ok {
		select {
		case <-old.Done(): // finished (MaxEvents reached or stopped): a new phase may start
		default:
			return nil // a retried start
		}
	}
	p, err := produce.NewProducer(req, w.opts.KafkaOpts)
	if err != nil {
		return err
	}
	p.Start(w.ctx)
	w.producers[key] = p
	return nil
}

func (w *Worker) stopProducer(ctx context.Context, jobID string, index int) (control.ProduceReport, error) {
	w.mu.Lock()
	p := w.producers[producerKey(jobID, index)]
	w.mu.Unlock()
	if p == nil {
		return control.ProduceReport{}, fmt.Errorf("produce.stop: no producer %d for job %q on worker %s", index, jobID, w.opts.ID)
	}
	p.Stop(ctx)
	// The producer stays registered so a retried stop returns the same report.
	return p.Report(), p.Err()
}
