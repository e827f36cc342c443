package runner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRunTopics(t *testing.T) {
	names := []string{"koala-a", "koala-a-sink", "koala-a-dead-letters", "koala-ab", "koala-b", "koala-b-sink", "other"}
	for _, tc := range []struct {
		topic string
		want  []string
	}{
		{"koala-a", []string{"koala-a", "koala-a-sink", "koala-a-dead-letters"}}, // not koala-ab
		{"koala-b", []string{"koala-b", "koala-b-sink"}},
		{"koala-c", nil},
		{"", nil}, // a run without a topic drops nothing
	} {
		if got := RunTopics(names, tc.topic); !slices.Equal(got, tc.want) {
			t.Errorf("RunTopics(%q) = %v, want %v", tc.topic, got, tc.want)
		}
	}
}

// TestDropRunTopics: the run's topics go, another run's stay.
func TestDropRunTopics(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "koala-a", "koala-a-sink", "koala-ab"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	DropRunTopics(ctx, &out, kc.ListenAddrs(), "koala-a")
	if !strings.Contains(out.String(), "dropped the run's 2 Kafka topic(s)") {
		t.Fatalf("report %q does not say two topics were dropped", out.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Names(); !slices.Equal(got, []string{"koala-ab"}) {
		t.Fatalf("topics left %v, want [koala-ab]", got)
	}
}
