package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// DefaultEvery is how often a step still running says so: well within the
// 30 s after which someone watching a silent terminal starts to wonder.
const DefaultEvery = 20 * time.Second

// step is one long piece of work, described for someone watching it.
type step struct {
	// what is what is being done, as a verb phrase: "building kube-apiserver v1.37.1".
	what string
	// why says what needs it: "make run's control plane".
	why string
	// expect is how long it takes the first time, "about 8 minutes on 2
	// cores"; "" when unknown.
	expect string
	// every is the time between two lines while it runs.
	every time.Duration
}

// run runs do, saying on out what it does and why before it starts, again
// every s.every while it runs (with the time so far), and when it ends.
// do's error is returned as it is.
func (s step) run(ctx context.Context, out io.Writer, do func(context.Context) error) error {
	start := time.Now()
	expect := ""
	if s.expect != "" {
		expect = "; a first build takes " + s.expect + ", later ones are cached"
	}
	fmt.Fprintf(out, ">> %s for %s%s\n", s.what, s.why, expect)
	done := make(chan error, 1)
	go func() { done <- do(ctx) }()
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(out, ">> %s failed after %s\n", s.what, since(start))
				return err
			}
			fmt.Fprintf(out, ">> done %s in %s\n", s.what, since(start))
			return nil
		case <-tick.C:
			fmt.Fprintf(out, ">> still %s for %s: %s so far%s\n", s.what, s.why, since(start), ofExpected(s.expect))
		}
	}
}

// since is the time since start, to the second.
func since(start time.Time) time.Duration { return time.Since(start).Round(time.Second) }

// ofExpected is " (expect ...)" or "".
func ofExpected(expect string) string {
	if expect == "" {
		return ""
	}
	return " (a first build takes " + expect + ")"
}
