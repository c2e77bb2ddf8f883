package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func main() {
	var s step
	flag.StringVar(&s.what, "what", "", "what the command does, as a verb phrase (required)")
	flag.StringVar(&s.why, "why", "", "what needs it (required)")
	flag.StringVar(&s.expect, "expect", "", "how long a first run takes, e.g. \"about 8 minutes on 2 cores\"")
	flag.DurationVar(&s.every, "every", DefaultEvery, "time between two progress lines while the command runs")
	flag.Parse()
	if s.what == "" || s.why == "" || flag.NArg() == 0 || s.every <= 0 {
		fmt.Fprintln(os.Stderr, "usage: progress --what=WHAT --why=WHY [--expect=HOW-LONG] [--every=20s] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	// Ctrl-C reaches the command too (same process group): wait for it to
	// end rather than die first.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := s.run(ctx, os.Stderr, func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, flag.Arg(0), flag.Args()[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		return cmd.Run()
	})
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintf(os.Stderr, "progress: %v\n", err)
		os.Exit(1)
	}
}
