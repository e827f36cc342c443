package runner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
)

// NATSRequester is the NATS request WorkerStatus makes (*nats.Conn).
type NATSRequester interface {
	RequestWithContext(ctx context.Context, subj string, data []byte) (*nats.Msg, error)
}

// WorkerStatus asks a worker for the status of job's tasks on it (ids
// nil: all of them), as the activities do. The benchmark's samplers and
// koala ui read the data plane with it.
func WorkerStatus(ctx context.Context, nc NATSRequester, jobID, workerID string, ids []string) (control.StatusReply, error) {
	var st control.StatusReply
	data, err := control.NewEnvelope(jobID, "", control.TasksRequest{TaskIDs: ids})
	if err != nil {
		return st, fmt.Errorf("status request to worker %s: %w", workerID, err)
	}
	msg, err := nc.RequestWithContext(ctx, control.WorkerSubject(workerID, control.VerbStatus), data)
	if err != nil {
		return st, fmt.Errorf("status of job %s on worker %s: %w", jobID, workerID, err)
	}
	var r control.Reply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return st, fmt.Errorf("status reply of worker %s: %w", workerID, err)
	}
	if r.Error != "" {
		return st, fmt.Errorf("status of job %s on worker %s: %s", jobID, workerID, r.Error)
	}
	if err := json.Unmarshal(r.Body, &st); err != nil {
		return st, fmt.Errorf("status body of worker %s: %w", workerID, err)
	}
	return st, nil
}
