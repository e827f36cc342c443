package control

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// requestBodies maps each verb to a fresh value of the body type its
// requests carry (see the Verb constants).
var requestBodies = map[string]func() any{
	VerbDeploy:       func() any { return new(DeployRequest) },
	VerbStart:        func() any { return new(TasksRequest) },
	VerbPause:        func() any { return new(BarrierRequest) },
	VerbResume:       func() any { return new(TasksRequest) },
	VerbRouting:      func() any { return new(RoutingRequest) },
	VerbStop:         func() any { return new(TasksRequest) },
	VerbFinish:       func() any { return new(FinishRequest) },
	VerbStatus:       func() any { return new(TasksRequest) },
	VerbProduceStart: func() any { return new(ProduceRequest) },
	VerbProduceStop:  func() any { return new(ProduceStopRequest) },
	VerbHandoff:      func() any { return new(HandoffRequest) },
}

func seedDeployment() Deployment {
	job := JobSpec{
		JobID: "job-1", Experiment: "e", Query: "counter", NumBuckets: 4, BatchSize: 100, Topic: "koala-job-1",
		Partitions: 2, KafkaBrokers: []string{"127.0.0.1:9092"}, StateBackend: "pebble", Params: map[string]string{"k": "v"},
		Operators: []OperatorSpec{
			{Name: "source", Kind: "kafka-source", Parallelism: 1},
			{Name: "counter", Kind: "counter", Parallelism: 2, Inputs: []string{"source"}, Keyed: true, Stateful: true},
		},
	}
	return Deployment{
		Job: job, Epoch: 3,
		Tasks: []TaskRef{
			{ID: "source-0", Operator: "source", Index: 0, WorkerID: "w1", DataAddr: "127.0.0.1:7001"},
			{ID: "counter-1", Operator: "counter", Index: 1, WorkerID: "w2", DataAddr: "127.0.0.1:7002"},
			{ID: "counter-0", Operator: "counter", Index: 0, WorkerID: "w1", DataAddr: "127.0.0.1:7001"},
		},
		Routing: []RoutingTable{{Operator: "counter", Epoch: 3, Buckets: []int{0, 1, 0, 1}}},
	}
}

// FuzzDecodeEnvelope feeds arbitrary bytes to the decoding a worker does
// with every control request: the envelope, then the body as the type of
// each verb. Nothing may panic; what decodes must survive a round trip
// unchanged (by value); a decoded deployment's accessors must work.
func FuzzDecodeEnvelope(f *testing.F) {
	dep := seedDeployment()
	for _, body := range []any{
		DeployRequest{Deployment: dep, TaskIDs: []string{"counter-1"}, StartOffsets: map[int32]int64{0: 5, 1: 7}},
		TasksRequest{TaskIDs: []string{"a", "b"}, WithValues: true},
		BarrierRequest{TaskIDs: []string{"source-0"}, BarrierID: "b-1"},
		RoutingRequest{Deployment: dep, InBand: true, BarrierID: "r-1", BarrierOperator: "counter"},
		FinishRequest{BarrierID: "eos", EndOffsets: map[int32]int64{0: 100, 1: 90}},
		ProduceRequest{Topic: "t", KafkaBrokers: []string{"b:1"}, Generator: "zipf", RatePerSec: 10, NumKeys: 5, Seed: -3, Skew: 1.2},
		HandoffRequest{Deployment: dep, TaskIDs: []string{"counter-0"}, Mode: "eager"},
		nil,
	} {
		data, err := NewEnvelope("job-1", "job-1-reconfig-1", body)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"v":2,"job":"j"}`))
	f.Add([]byte(`{"v":1,"job":"j","body":{"task_ids":null}}`))
	f.Add([]byte(`{"v":1,"body":[1,2]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			return
		}
		if env.Version != Version {
			t.Fatalf("decoded version %d, want only %d", env.Version, Version)
		}
		// The envelope round-trips.
		again, err := json.Marshal(env)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", env, err)
		}
		env2, err := DecodeEnvelope(again)
		if err != nil {
			t.Fatalf("re-decode %s: %v", again, err)
		}
		if env2.JobID != env.JobID || env2.ReconfigID != env.ReconfigID || !jsonEqual(env.Body, env2.Body) {
			t.Fatalf("round trip changed the envelope: %+v → %+v", env, env2)
		}
		for _, verb := range sortedVerbs() {
			v := requestBodies[verb]()
			if len(env.Body) > 0 {
				if err := json.Unmarshal(env.Body, v); err != nil {
					continue
				}
			}
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s: re-encode %+v: %v", verb, v, err)
			}
			w := requestBodies[verb]()
			if err := json.Unmarshal(raw, w); err != nil {
				t.Fatalf("%s: re-decode %s: %v", verb, raw, err)
			}
			// Once decoded, a body encodes stably (nil and empty lists
			// both mean "none" and may trade places once).
			raw2, err := json.Marshal(w)
			if err != nil {
				t.Fatalf("%s: re-encode %+v: %v", verb, w, err)
			}
			if !bytes.Equal(raw, raw2) {
				t.Fatalf("%s: round trip changed the body:\n%s\n%s", verb, raw, raw2)
			}
			var d *Deployment
			switch r := v.(type) {
			case *DeployRequest:
				d = &r.Deployment
			case *RoutingRequest:
				d = &r.Deployment
			case *HandoffRequest:
				d = &r.Deployment
			}
			if d != nil {
				exercise(t, *d)
			}
		}
	})
}

// exercise calls every accessor of a decoded deployment and checks what
// they promise.
func exercise(t *testing.T, d Deployment) {
	t.Helper()
	for _, op := range d.Job.Operators {
		prev := -1 << 62
		for _, ref := range d.TasksOf(op.Name) {
			if ref.Operator != op.Name {
				t.Fatalf("TasksOf(%q) returned a task of %q", op.Name, ref.Operator)
			}
			if ref.Index < prev {
				t.Fatalf("TasksOf(%q) not ordered by index", op.Name)
			}
			prev = ref.Index
		}
		if rt, ok := d.Table(op.Name); ok && rt.Operator != op.Name {
			t.Fatalf("Table(%q) returned the table of %q", op.Name, rt.Operator)
		}
		d.Job.Operator(op.Name)
		d.Job.Downstreams(op.Name)
	}
	seen := map[string]bool{}
	for _, w := range d.Workers() {
		if seen[w] {
			t.Fatalf("Workers() lists %q twice", w)
		}
		seen[w] = true
	}
}

// jsonEqual compares two JSON texts by value (encoding/json escapes
// characters like '&' when it re-encodes, so bytes may differ).
func jsonEqual(a, b json.RawMessage) bool {
	decode := func(raw json.RawMessage) (any, bool) {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil, true
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

func sortedVerbs() []string {
	out := make([]string, 0, len(requestBodies))
	for v := range requestBodies {
		out = append(out, v)
	}
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k] < out[k-1]; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

// FuzzVerbOf checks that VerbOf inverts WorkerSubject and rejects other
// subjects.
func FuzzVerbOf(f *testing.F) {
	f.Add("w1", "deploy", "koala.worker.w1.deploy")
	f.Add("w1", "state.handoff", "koala.worker.w2.deploy")
	f.Add("", "", "koala.worker..")
	f.Fuzz(func(t *testing.T, worker, verb, subject string) {
		if verb != "" {
			if got := VerbOf(worker, WorkerSubject(worker, verb)); got != verb {
				t.Fatalf("VerbOf(%q, WorkerSubject(%q, %q)) = %q", worker, worker, verb, got)
			}
		}
		if got := VerbOf(worker, subject); got != "" && WorkerSubject(worker, got) != subject {
			t.Fatalf("VerbOf(%q, %q) = %q, but that is the subject %q", worker, subject, got, WorkerSubject(worker, got))
		}
	})
}
