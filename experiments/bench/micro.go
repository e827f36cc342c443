package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// benchMicro runs the testing.B benchmarks with the go toolchain. They are
// run as `go test -bench` rather than through testing.Benchmark inside this
// binary so that the numbers are exactly those a developer gets from
// `go test -bench` on the same files (one source of truth; the outputs
// batching benchmark needs package-internal types anyway). The binary under
// test is built from the same tree as bin/koala.
func benchMicro(ctx context.Context, o Options, rep *BenchReport) string {
	goBin, err := exec.LookPath(o.GoCommand)
	if err != nil {
		rep.MicroError = "go toolchain not on PATH: micro-benchmarks skipped"
		fmt.Println("micro:", rep.MicroError)
		return ""
	}
	args := []string{"test", "-count=1", "-run", "^$", "-bench", o.MicroRegex, "-benchtime", o.Benchtime, "-timeout", "15m"}
	var out []byte
	if o.profiles != nil {
		// go test takes -cpuprofile for one package at a time.
		out = o.profiles.runMicro(ctx, goBin, args, o.MicroPackages, rep)
	} else {
		args = append(args, o.MicroPackages...)
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
	rep.Micro = CollapseMicro(ParseGoBench(string(out)))
	for _, m := range rep.Micro {
		fmt.Printf("  %-45s %12.0f ns/op\n", m.Name, m.Metrics["ns/op"])
	}
	return string(out)
}

// benchMicroRepeat runs the --micro-repeat benchmarks --micro-repeat-count
// more times (without profiles), so the report can give their median: the
// KLT lookup is bound by memory access, and one run on a shared machine can
// land in another tenant's burst of memory traffic.
func benchMicroRepeat(ctx context.Context, goBin string, o Options, rep *BenchReport) []byte {
	if o.MicroRepeat == "" || o.MicroRepeatCount == 0 {
		return nil
	}
	args := []string{"test", fmt.Sprintf("-count=%d", o.MicroRepeatCount), "-run", "^$", "-bench", o.MicroRepeat, "-benchtime", o.Benchtime, "-timeout", "15m"}
	args = append(args, o.MicroPackages...)
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
