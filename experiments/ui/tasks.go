package ui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// operatorsFrom builds a job's operators from its workers' status replies
// and its metric rows (in time order). The replies say which tasks run
// where; without any (no worker answered) the tasks that wrote a row in
// the last `recent` before now stand in. The rows give each task its
// series and latest second.
func operatorsFrom(replies []control.StatusReply, rows []metrics.TaskRow, now time.Time, recent time.Duration) []OperatorView {
	tasks := map[string]*TaskView{}
	var order []string
	epochs := map[string][]int64{} // operator -> routing epochs its own and its upstreams' tasks use
	edges := map[string]map[string]bool{}
	add := func(t TaskView) *TaskView {
		if p, ok := tasks[t.ID]; ok {
			return p
		}
		p := &t
		tasks[t.ID] = p
		order = append(order, t.ID)
		return p
	}
	for _, rep := range replies {
		for _, st := range rep.Tasks {
			add(TaskView{ID: st.TaskID, Operator: st.Operator, Worker: rep.WorkerID, Live: true, Running: st.Running,
				Paused: st.Paused, Epoch: st.Epoch, KeysLeft: st.KLTSize})
			if st.Epoch > 0 {
				epochs[st.Operator] = append(epochs[st.Operator], st.Epoch)
			}
			for op, e := range st.Epochs {
				if op == st.Operator {
					continue
				}
				if edges[st.Operator] == nil {
					edges[st.Operator] = map[string]bool{}
				}
				edges[st.Operator][op] = true
				if e > 0 {
					epochs[op] = append(epochs[op], e)
				}
			}
		}
	}
	if len(tasks) == 0 {
		for _, r := range rows {
			if now.Sub(r.Time) <= recent {
				p := add(TaskView{ID: r.Task, Operator: r.Operator, Worker: r.Worker})
				p.Worker = r.Worker // the latest row's worker
			}
		}
	}
	for _, r := range rows {
		t := tasks[r.Task]
		if t == nil {
			continue
		}
		busy := max(0, 1-r.IdleRatio-r.BackpressureRatio)
		sec := r.Time.Truncate(time.Second).Unix()
		s := &t.Series
		if n := len(s.Time); n > 0 && s.Time[n-1] == sec { // two rows of one second: sum the counts
			s.Rate[n-1] += float64(r.RecordsIn)
			s.Lag[n-1] = float64(r.KafkaLag)
		} else {
			s.Time = append(s.Time, sec)
			s.Rate = append(s.Rate, float64(r.RecordsIn))
			s.Busy = append(s.Busy, busy)
			s.Idle = append(s.Idle, r.IdleRatio)
			s.Lag = append(s.Lag, float64(r.KafkaLag))
		}
		n := len(s.Time) - 1
		t.Rate, t.Busy, t.Idle, t.KafkaLag = s.Rate[n], busy, r.IdleRatio, r.KafkaLag
	}

	byOp := map[string]*OperatorView{}
	for _, id := range order {
		t := tasks[id]
		op := byOp[t.Operator]
		if op == nil {
			op = &OperatorView{Name: t.Operator}
			byOp[t.Operator] = op
		}
		op.Tasks = append(op.Tasks, *t)
		op.Rate += t.Rate
	}
	var out []OperatorView
	for _, name := range operatorOrder(byOp, edges) {
		op := byOp[name]
		slices.SortFunc(op.Tasks, func(a, b TaskView) int { return cmp.Compare(taskIndex(a.ID), taskIndex(b.ID)) })
		load := map[string]int{}
		for _, t := range op.Tasks {
			load[t.Worker]++
		}
		for w, n := range load {
			op.Workers = append(op.Workers, WorkerLoad{Worker: w, Tasks: n})
		}
		slices.SortFunc(op.Workers, func(a, b WorkerLoad) int { return cmp.Compare(a.Worker, b.Worker) })
		if es := epochs[name]; len(es) > 0 {
			op.MinEpoch, op.Epoch = slices.Min(es), slices.Max(es)
		}
		out = append(out, *op)
	}
	return out
}

// operatorOrder lists the operators upstream first: an operator comes
// after every operator whose tasks route to it (edges), ties and cycles
// broken by name.
func operatorOrder(ops map[string]*OperatorView, edges map[string]map[string]bool) []string {
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	slices.Sort(names)
	indeg := map[string]int{}
	for from, tos := range edges {
		if ops[from] == nil {
			continue
		}
		for to := range tos {
			if ops[to] != nil {
				indeg[to]++
			}
		}
	}
	var out []string
	done := map[string]bool{}
	for len(out) < len(names) {
		next := ""
		for _, n := range names {
			if !done[n] && indeg[n] == 0 {
				next = n
				break
			}
		}
		if next == "" { // a cycle: take the first left
			for _, n := range names {
				if !done[n] {
					next = n
					break
				}
			}
		}
		done[next] = true
		out = append(out, next)
		for to := range edges[next] {
			indeg[to]--
		}
	}
	return out
}

// taskIndex is the index in a task id "<operator>-<index>" (control.TaskID),
// or -1.
func taskIndex(id string) int {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return -1
	}
	return n
}

// keysLeft sums the live tasks' lookup-table entries; -1 when no task is
// live (no worker answered).
func keysLeft(ops []OperatorView) int {
	n, live := 0, false
	for _, op := range ops {
		for _, t := range op.Tasks {
			if t.Live {
				live = true
				n += t.KeysLeft
			}
		}
	}
	if !live {
		return -1
	}
	return n
}
