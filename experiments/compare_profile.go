package experiments

import (
	"fmt"
	"path/filepath"
	"strings"

	"koala/experiments/cpuprof"
)

// Where the workers' CPU went in each run of `koala compare --profile`:
// one CPU profile per worker a few seconds before the first trigger and
// one after it, split by kind of work (cpuprof.WorkerCategories), so a dip
// or a slow drain is named by what took the cores, not only measured.

// Profile windows.
const (
	WindowBefore = "before"
	WindowAfter  = "after"
)

// WorkerProfile is one worker's CPU profile over one window of a run.
type WorkerProfile struct {
	Window string `json:"window"`
	// FromSec is where the window starts, in seconds from the first
	// reconfiguration's trigger (negative: before it).
	FromSec float64 `json:"from_sec"`
	Seconds int     `json:"seconds"`
	Worker  string  `json:"worker"`
	// Tasks are the tasks the worker ran when the run ended.
	Tasks []string       `json:"tasks,omitempty"`
	File  string         `json:"file,omitempty"`
	Split *cpuprof.Split `json:"split,omitempty"`
	Error string         `json:"error,omitempty"`
}

// minShownShare is the share (percent) a category must reach in some
// profile of a comparison to get a column of its own; the others are
// added to "other".
const minShownShare = 2.0

// profileMarkdown is compare.md's section on the runs' CPU profiles; empty
// when none was taken.
func (c Comparison) profileMarkdown() string {
	names := c.ProfileCategories
	var any bool
	shown := make([]bool, len(names))
	for _, r := range c.Rows {
		for _, p := range r.Profiles {
			any = true
			if p.Split == nil || len(p.Split.Shares) != len(names) {
				continue
			}
			for i, s := range p.Split.Shares {
				shown[i] = shown[i] || s >= minShownShare
			}
		}
	}
	if !any {
		return ""
	}
	last := len(names) - 1 // cpuprof.Other: always shown, with what is folded into it
	if last >= 0 {
		shown[last] = true
	}
	var b strings.Builder
	b.WriteString("\n## Where the workers' CPU went (`--profile`)\n\n")
	b.WriteString("One CPU profile per worker and window (`/debug/pprof/profile`; open one with `go tool pprof -top <file>`). " +
		"*cores*: CPU seconds sampled over the window's seconds. Each sample counts once, in the first of these kinds of work whose functions are on its stack " +
		"(so the shares add up to 100 %); kinds under " + fmt.Sprintf("%.0f", minShownShare) + " % in every profile are folded into *other*. " +
		"*Pebble reads* cuts across them: samples reading through a Pebble iterator, by any caller.\n\n")
	hdr := []string{"protocol", "window", "worker (tasks at the end)", "cores"}
	for i, n := range names {
		if shown[i] {
			hdr = append(hdr, n)
		}
	}
	hdr = append(hdr, cpuprof.PebbleReads.Name)
	b.WriteString("| " + strings.Join(hdr, " | ") + " |\n|" + strings.Repeat("---|", len(hdr)) + "\n")
	for _, r := range c.Rows {
		for _, p := range r.Profiles {
			cells := []string{r.Protocol, fmt.Sprintf("%s (%+.0f s, %d s)", p.Window, p.FromSec, p.Seconds), workerText(p)}
			if p.Split == nil || len(p.Split.Shares) != len(names) {
				cells = append(cells, "not measured: "+orText(p.Error, "no profile"))
				for range len(hdr) - len(cells) {
					cells = append(cells, "")
				}
			} else {
				cells = append(cells, fmt.Sprintf("%.2f", p.Split.CPUSec/float64(max(p.Seconds, 1))))
				var folded float64
				for i, s := range p.Split.Shares {
					if !shown[i] {
						folded += s
					}
				}
				for i, s := range p.Split.Shares {
					if shown[i] {
						if i == last {
							s += folded
						}
						cells = append(cells, fmt.Sprintf("%.1f", s))
					}
				}
				cells = append(cells, fmt.Sprintf("%.1f", p.Split.Across))
			}
			for i := range cells {
				cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	return b.String()
}

func workerText(p WorkerProfile) string {
	s := p.Worker
	if len(p.Tasks) > 0 {
		s += " (" + strings.Join(p.Tasks, ", ") + ")"
	}
	if p.File != "" {
		s += " `" + filepath.Base(p.File) + "`"
	}
	return s
}
