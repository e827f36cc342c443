package cpuprof

import (
	"fmt"
	"os"

	"github.com/google/pprof/profile"
)

// CPUIndex is the index of the sample value holding CPU time: the "cpu"
// sample type of a Go CPU profile, else the last one.
func CPUIndex(p *profile.Profile) (int, error) {
	if len(p.SampleType) == 0 {
		return 0, fmt.Errorf("profile has no sample types")
	}
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			return i, nil
		}
	}
	return len(p.SampleType) - 1, nil
}

// Nanos converts a sample value of type st to nanoseconds.
func Nanos(v int64, unit string) float64 {
	switch unit {
	case "seconds":
		return float64(v) * 1e9
	case "milliseconds":
		return float64(v) * 1e6
	case "microseconds":
		return float64(v) * 1e3
	}
	return float64(v) // nanoseconds, and counts taken as they are
}

// Read parses the profile at path.
func Read(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return p, nil
}
