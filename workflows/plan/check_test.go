package plan

import (
	"strings"
	"testing"
)

func TestCheckDirections(t *testing.T) {
	tests := []struct {
		name  string
		pairs []PairMoves
		want  string // substring of the error; "" for none
	}{
		{"no moves", nil, ""},
		{"one way", []PairMoves{{From: "m-0", To: "m-1", Buckets: []int{3}}}, ""},
		{"fan in", []PairMoves{{From: "m-2", To: "m-0", Buckets: []int{1}}, {From: "m-3", To: "m-0", Buckets: []int{2}}}, ""},
		{"fan out", []PairMoves{{From: "m-0", To: "m-1", Buckets: []int{1}}, {From: "m-0", To: "m-2", Buckets: []int{2}}}, ""},
		{"swap", []PairMoves{{From: "m-0", To: "m-1", Buckets: []int{1}}, {From: "m-1", To: "m-0", Buckets: []int{2}}}, "task m-1 would both give and gain"},
		{"chain", []PairMoves{{From: "m-0", To: "m-1", Buckets: []int{1}}, {From: "m-1", To: "m-2", Buckets: []int{5, 6}}}, "task m-1 would both give and gain buckets (it gains [1] from m-0)"},
		{"cycle of three", []PairMoves{{From: "m-0", To: "m-1", Buckets: []int{1}}, {From: "m-1", To: "m-2", Buckets: []int{2}}, {From: "m-2", To: "m-0", Buckets: []int{3}}}, "would both give and gain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Plan{Operator: "m", MovesByPair: tc.pairs}.CheckDirections()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
