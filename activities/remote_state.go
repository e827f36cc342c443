package activities

import (
	"context"
	"fmt"

	"koala/dataplane/control"
	"koala/statesvc"
)

// DropRemoteState deletes a finished job's keyed state from the remote state
// service (StateBackend "remote-pebble"): every key of the job's namespace
// on every server named in its RemotePebbleAddrs, and nothing of any other
// job (namespaces are disjoint key ranges; see statesvc.Remote). Other state
// backends keep state on the workers: nothing to do. Call it only once the
// job's tasks stopped.
func (a *Activities) DropRemoteState(ctx context.Context, job control.JobSpec) error {
	if job.StateBackend != statesvc.BackendRemotePebble {
		return nil
	}
	addrs := statesvc.ParseAddrs(job.Params[control.ParamRemotePebbleAddrs])
	r, err := statesvc.OpenRemote(addrs, statesvc.RemoteOptions{Namespace: job.JobID, Creds: a.StateCreds})
	if err != nil {
		return fmt.Errorf("drop remote state of job %s: %w", job.JobID, err)
	}
	defer r.Close()
	if err := r.DropNamespace(); err != nil {
		return fmt.Errorf("drop remote state of job %s: %w", job.JobID, err)
	}
	a.logger().Info("dropped the job's remote state", "job", job.JobID, "servers", addrs)
	return nil
}
