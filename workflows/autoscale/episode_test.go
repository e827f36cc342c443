package autoscale

import (
	"testing"

	"koala/dataplane/metrics"
)

func series(vals ...float64) []metrics.Point {
	out := make([]metrics.Point, len(vals))
	for i, v := range vals {
		out[i] = metrics.Point{Sec: float64(i), Value: v}
	}
	return out
}

func TestEpisode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lag, tput []metrics.Point
		want      EpisodeStats
		minPre    float64
	}{
		{
			name: "lag rises after the step at 3 and is back at 8",
			//         0    1    2    3    4     5     6     7    8    9
			lag:    series(100, 120, 90, 300, 2000, 5000, 3000, 400, 110, 100),
			tput:   series(10, 10, 10, 15, 9, 18, 20, 20, 20, 20),
			want:   EpisodeStats{BaselineLag: 120, PeakLag: 5000, PeakSec: 5, Recovered: true, RecoveredSec: 5, PreThroughput: 10, MinThroughput: 9},
			minPre: 0.9,
		},
		{
			name:   "never back within the episode",
			lag:    series(100, 100, 100, 500, 900, 800, 700),
			tput:   series(10, 10, 10, 10, 10, 10, 10),
			want:   EpisodeStats{BaselineLag: 100, PeakLag: 900, PeakSec: 4, PreThroughput: 10, MinThroughput: 10},
			minPre: 1,
		},
		{
			name: "no rise above the baseline",
			lag:  series(100, 300, 100, 200, 250, 100),
			tput: nil,
			want: EpisodeStats{BaselineLag: 300, PeakLag: 250, PeakSec: 4, Recovered: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Episode(tc.lag, tc.tput, 0, 3, 100)
			if got != tc.want {
				t.Fatalf("Episode:\n got %+v\nwant %+v", got, tc.want)
			}
			if got.MinOverPre() != tc.minPre {
				t.Fatalf("min/pre %v, want %v", got.MinOverPre(), tc.minPre)
			}
		})
	}
}
