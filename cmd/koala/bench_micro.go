package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"koala/experiments"
)

// benchMicro runs the testing.B benchmarks with the go toolchain. They are
// run as `go test -bench` rather than through testing.Benchmark inside this
// binary so that the numbers are exactly those a developer gets from
// `go test -bench` on the same files (one source of truth; the outputs
// batching benchmark needs package-internal types anyway). The binary under
// test is built from the same tree as bin/koala.
func benchMicro(ctx context.Context, o benchOpts, rep *experiments.BenchReport) string {
	goBin, err := exec.LookPath(envOr("GO", "go"))
	if err != nil {
		rep.MicroError = "go toolchain not on PATH: micro-benchmarks skipped"
		fmt.Println("micro:", rep.MicroError)
		return ""
	}
	args := []string{"test", "-count=1", "-run", "^$", "-bench", o.microRegex, "-benchtime", o.benchtime, "-timeout", "15m"}
	var out []byte
	if o.profiles != nil {
		// go test takes -cpuprofile for one package at a time.
		out = o.profiles.runMicro(ctx, goBin, args, splitList(o.microPkgs), rep)
	} else {
		args = append(args, splitList(o.microPkgs)...)
		rep.MicroCommand = "go " + strings.Join(quoteArgs(args), " ")
		fmt.Println("micro:", rep.MicroCommand)
		cmd := exec.CommandContext(ctx, goBin, args...)
		var err error
		out, err = cmd.CombinedOutput()
		if err != nil {
			rep.MicroError = fmt.Sprintf("go test: %v: %s", err, lastLines(string(out), 5))
		}
	}
	out = append(out, benchMicroRepeat(ctx, goBin, o, rep)...)
	rep.Micro = experiments.CollapseMicro(experiments.ParseGoBench(string(out)))
	for _, m := range rep.Micro {
		fmt.Printf("  %-45s %12.0f ns/op\n", m.Name, m.Metrics["ns/op"])
	}
	return string(out)
}

// benchMicroRepeat runs the --micro-repeat benchmarks --micro-repeat-count
// more times (without profiles), so the report can give their median: the
// KLT lookup is bound by memory access, and one run on a shared machine can
// land in another tenant's burst of memory traffic.
func benchMicroRepeat(ctx context.Context, goBin string, o benchOpts, rep *experiments.BenchReport) []byte {
	if o.microRepeat == "" || o.microRepeatCount == 0 {
		return nil
	}
	args := []string{"test", fmt.Sprintf("-count=%d", o.microRepeatCount), "-run", "^$", "-bench", o.microRepeat, "-benchtime", o.benchtime, "-timeout", "15m"}
	args = append(args, splitList(o.microPkgs)...)
	cmd := "go " + strings.Join(quoteArgs(args), " ")
	rep.MicroCommand += "; " + cmd
	fmt.Println("micro:", cmd)
	out, err := exec.CommandContext(ctx, goBin, args...).CombinedOutput()
	if err != nil {
		if rep.MicroError != "" {
			rep.MicroError += "; "
		}
		rep.MicroError += fmt.Sprintf("repeat: go test: %v: %s", err, lastLines(string(out), 5))
	}
	return out
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "|$^ ") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " / ")
}
