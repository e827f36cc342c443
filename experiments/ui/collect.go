package ui

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// JobList is /api/jobs: the jobs the workers run and those that wrote
// metric rows lately, running ones first.
type JobList struct {
	At       time.Time    `json:"at"`
	Jobs     []JobSummary `json:"jobs"`
	Problems []string     `json:"problems,omitempty"`
}

// jobs builds the job list.
func (s *Server) jobs(ctx context.Context) JobList {
	now := s.cfg.Now()
	list := JobList{At: now, Jobs: []JobSummary{}}
	byID := map[string]JobSummary{}
	if s.cfg.Workers != nil {
		for id, l := range jobsOn(s.cfg.Workers.Live()) {
			ws := slices.Sorted(slices.Values(l.workers))
			byID[id] = JobSummary{ID: id, Running: true, Tasks: l.tasks, Workers: ws}
		}
	}
	if s.cfg.Metrics != nil {
		seen, err := s.cfg.Metrics.JobsSince(ctx, now.Add(-s.cfg.RecentJobs))
		if err != nil {
			list.Problems = append(list.Problems, fmt.Sprintf("ClickHouse: %v", err))
		}
		for _, m := range seen {
			j := byID[m.Job]
			j.ID, j.Experiment, j.LastMetric = m.Job, m.Experiment, m.Last
			byID[m.Job] = j
		}
	}
	for _, j := range byID {
		j.TemporalURL = s.temporalLink(j.ID)
		list.Jobs = append(list.Jobs, j)
	}
	slices.SortFunc(list.Jobs, func(a, b JobSummary) int {
		if a.Running != b.Running {
			if a.Running {
				return -1
			}
			return 1
		}
		if c := b.LastMetric.Compare(a.LastMetric); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return list
}

// job builds the view of one job; found is false when nothing at all is
// known of it (no live task, no metric row in the window or lately, no
// reconfiguration event).
func (s *Server) job(ctx context.Context, id string) (v JobView, found bool) {
	now := s.cfg.Now()
	v = JobView{ID: id, At: now, TemporalURL: s.temporalLink(id), Operators: []OperatorView{}, Timeline: []ReconfigView{}}
	var replies []control.StatusReply
	if s.cfg.Workers != nil {
		var workers []string
		if l := jobsOn(s.cfg.Workers.Live())[id]; l != nil {
			workers = l.workers
		}
		replies, v.Problems = s.statuses(ctx, id, workers)
		v.Running = len(workers) > 0
	}
	var rows []metrics.TaskRow
	var evs []metrics.ReconfigEvent
	if s.cfg.Metrics != nil {
		var err error
		if rows, err = s.cfg.Metrics.TaskRows(ctx, id, now.Add(-s.cfg.Window), now.Add(time.Second)); err != nil {
			v.Problems = append(v.Problems, fmt.Sprintf("ClickHouse: %v", err))
		}
		if evs, err = s.cfg.Metrics.ReconfigEvents(ctx, id); err != nil {
			v.Problems = append(v.Problems, fmt.Sprintf("ClickHouse: %v", err))
		}
	}
	v.Operators = operatorsFrom(replies, rows, now, s.cfg.Recent)
	for _, op := range v.Operators {
		v.Tasks += len(op.Tasks)
	}
	for _, e := range evs {
		if e.Experiment != "" {
			v.Experiment = e.Experiment
		}
	}
	v.Timeline = reconfigsFrom(evs, now, s.cfg.Quiet)
	left := keysLeft(v.Operators)
	for i := range v.Timeline {
		r := &v.Timeline[i]
		r.TemporalURL = s.temporalLink(r.ID)
		addMigration(r, rows, left, now)
	}
	if n := len(v.Timeline); n > 0 {
		latest := v.Timeline[n-1]
		v.Reconfig = &latest
	}
	found = v.Running || len(rows) > 0 || len(evs) > 0
	if !found && s.cfg.Metrics != nil {
		if seen, err := s.cfg.Metrics.JobsSince(ctx, now.Add(-s.cfg.RecentJobs)); err == nil {
			found = slices.ContainsFunc(seen, func(j metrics.JobSeen) bool { return j.Job == id })
		}
	}
	return v, found
}

// statuses asks each worker, at once, for the status of job's tasks on
// it; a worker that does not answer within StatusTimeout is named in
// problems.
func (s *Server) statuses(ctx context.Context, job string, workers []string) (replies []control.StatusReply, problems []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, s.cfg.StatusTimeout)
			defer cancel()
			st, err := s.cfg.Workers.Status(sctx, job, w)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				problems = append(problems, fmt.Sprintf("worker %s: %v", w, err))
				return
			}
			if st.WorkerID == "" {
				st.WorkerID = w
			}
			replies = append(replies, st)
		})
	}
	wg.Wait()
	slices.SortFunc(replies, func(a, b control.StatusReply) int { return cmp.Compare(a.WorkerID, b.WorkerID) })
	slices.Sort(problems)
	return replies, problems
}

// temporalLink is the Temporal UI page of workflow id, "" without a UI URL.
func (s *Server) temporalLink(id string) string {
	if s.cfg.TemporalUI == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.TemporalUI, "/") + "/namespaces/" + url.PathEscape(s.cfg.Namespace) + "/workflows/" + url.PathEscape(id)
}
