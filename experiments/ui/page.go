package ui

import (
	"fmt"
	"html/template"
	"math"
	"time"
)

// jobPage is what the job templates render: the view, and the data of
// its small charts keyed as the page's chart placeholders name them
// ("<kind>/<task>", "migration"), each in uPlot's column layout (Unix
// seconds first).
type jobPage struct {
	JobView
	Charts map[string][][]float64
	HasLag map[string]bool // operator -> some task of it had Kafka lag
	// Window is the charts' time span in seconds, ending at the view's time.
	Window int
}

func pageOf(v JobView, window time.Duration) jobPage {
	p := jobPage{JobView: v, Charts: map[string][][]float64{}, HasLag: map[string]bool{}, Window: int(window.Seconds())}
	for _, op := range v.Operators {
		for _, t := range op.Tasks {
			s := t.Series
			xs := make([]float64, len(s.Time))
			for i, x := range s.Time {
				xs[i] = float64(x)
			}
			p.Charts["rate/"+t.ID] = [][]float64{xs, s.Rate}
			p.Charts["busy/"+t.ID] = [][]float64{xs, s.Busy, s.Idle}
			p.Charts["lag/"+t.ID] = [][]float64{xs, s.Lag}
			for _, l := range s.Lag {
				if l > 0 {
					p.HasLag[op.Name] = true
				}
			}
		}
	}
	if r := v.Reconfig; r != nil {
		xs := make([]float64, len(r.RateTime))
		for i, x := range r.RateTime {
			xs[i] = float64(x)
		}
		p.Charts["migration"] = [][]float64{xs, r.RateBytes}
	}
	return p
}

var funcs = template.FuncMap{
	"rate":    humanRate,
	"num":     func(n any) string { return humanCount(toFloat(n)) },
	"bytes":   func(n any) string { return humanBytes(toFloat(n)) },
	"pctw":    func(f float64) string { return fmt.Sprintf("%.1f%%", 100*min(max(f, 0), 1)) },
	"opOf":    func(p jobPage, op OperatorView) opPage { return opPage{Op: op, HasLag: p.HasLag[op.Name]} },
	"pct":     func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"secs":    humanSeconds,
	"clock":   func(t time.Time) string { return t.Local().Format("15:04:05") },
	"ms":      func(f float64) string { return humanSeconds(f / 1000) },
	"ago":     func(now, t time.Time) string { return humanSeconds(now.Sub(t).Seconds()) + " ago" },
	"nonzero": func(t time.Time) bool { return !t.IsZero() },
	"plural":  plural,
}

// opPage is what the operator template renders.
type opPage struct {
	Op     OperatorView
	HasLag bool
}

// toFloat converts the numbers the views hold.
func toFloat(n any) float64 {
	switch v := n.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case float64:
		return v
	default:
		return math.NaN()
	}
}

// humanCount prints n with a K, M or G suffix above a thousand.
func humanCount(n float64) string {
	switch a := math.Abs(n); {
	case a >= 1e9:
		return fmt.Sprintf("%.1f G", n/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.1f M", n/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1f K", n/1e3)
	default:
		return fmt.Sprintf("%.0f", n)
	}
}

func humanRate(n float64) string { return humanCount(n) + "/s" }

// humanBytes prints n in B, KiB, MiB or GiB; a negative n is unknown.
func humanBytes(n float64) string {
	switch {
	case n < 0:
		return "?"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", n)
	}
}

// humanSeconds prints a duration of s seconds as 850 ms, 12.3 s or 4m05s.
func humanSeconds(s float64) string {
	switch {
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 60:
		return fmt.Sprintf("%.1f s", s)
	default:
		d := time.Duration(s) * time.Second
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
}

// plural is "1 task", "2 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
