package dataplane

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"koala/dataplane/dptest/testlog"
	"koala/dataplane/dptest/testnats"
	"koala/dataplane/transport"
)

func TestWorkerLogsNoPassword(t *testing.T) {
	const password = "w0rker-s3cret-pw"
	ns := testnats.Start(t, &natsserver.Options{Username: "koala", Password: password})
	var logs testlog.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The password both in the URL and in the options, as operators do.
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://koala:"+password+"@", 1)
	w, err := NewWorker(Options{ID: "w1", NATSURL: url, NATSSecurity: transport.NATSSecurity{User: "koala", Password: password}, DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "worker ready") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no \"worker ready\" in the log within 10s:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, password) {
		t.Errorf("worker log contains the NATS password:\n%s", out)
	}
	if !strings.Contains(out, "koala:REDACTED@") {
		t.Errorf("worker log does not show the redacted NATS URL:\n%s", out)
	}

	// A refused connection: the error names the address but not the password.
	_, err = NewWorker(Options{ID: "w2", NATSURL: ns.ClientURL(), NATSSecurity: transport.NATSSecurity{User: "koala", Password: password + "x"}, Logger: log})
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "NATS") {
		t.Errorf("wrong password: err = %v", err)
	}
}
