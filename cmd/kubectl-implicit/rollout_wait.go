package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
)

// rolloutWait is rollout status's --watch and --timeout.
type rolloutWait struct {
	watch   bool
	timeout time.Duration
}

// rolloutPollInterval is how often a waiting rollout status reads again.
const rolloutPollInterval = 2 * time.Second

// complete reports whether the rollout st describes is complete: no
// candidate is open, so every namespace sees one version (the candidate was
// promoted or aborted, or there never was one).
func (st *RolloutStatus) complete() bool { return len(st.Candidates) == 0 && st.CandidateCount == 0 }

// auditOnly reports whether st's one candidate is audit-only: well formed,
// and no namespace sees it.
func (st *RolloutStatus) auditOnly() bool {
	return len(st.Candidates) == 1 && st.Candidates[0].Problem == "" && st.CandidateCount == 0
}

// rolloutStatus prints r's status, then, with w.watch, waits until the
// rollout completes, printing each change of who sees which version.
func (o *options) rolloutStatus(cmd *cobra.Command, r *rollout, w rolloutWait) error {
	out := cmd.OutOrStdout()
	read := func(ctx context.Context) (*RolloutStatus, error) {
		st, err := r.status(ctx)
		if err != nil {
			return nil, err
		}
		r.audit(ctx, st)
		return st, nil
	}
	ctx := cmd.Context()
	st, err := read(ctx)
	if err != nil {
		return err
	}
	wait := w.watch && !st.complete() && !st.auditOnly()
	if !isTable(o.output) {
		if wait {
			if st, err = o.waitRollout(ctx, r, w, read, nil); err != nil {
				return err
			}
		}
		return printObject(out, o.output, st)
	}
	if err := printRolloutStatus(out, st); err != nil {
		return err
	}
	switch {
	case st.complete():
		fmt.Fprintf(out, "rollout of %s %s complete: every namespace sees one version.\n", st.Resource, st.Source)
		return nil
	case st.auditOnly():
		fmt.Fprintf(out, "Candidate %s is audit-only (its selector matches no namespace): it never completes by itself; promote or abort it.\n", st.Candidates[0].Name)
		return nil
	case !wait:
		return nil
	}
	fmt.Fprintf(out, "Waiting for the candidate to be promoted or aborted (--watch=false to return now)...\n")
	last := st
	final, err := o.waitRollout(ctx, r, w, read, func(st *RolloutStatus) {
		if st.CandidateCount != last.CandidateCount || st.StableCount != last.StableCount {
			fmt.Fprintf(out, "%d namespace(s) see the candidate, %d the stable version.\n", st.CandidateCount, st.StableCount)
		}
		last = st
	})
	if err != nil {
		return err
	}
	if final.auditOnly() {
		fmt.Fprintf(out, "Candidate %s is now audit-only (its selector matches no namespace): it never completes by itself; promote or abort it.\n", final.Candidates[0].Name)
		return nil
	}
	fmt.Fprintf(out, "rollout of %s %s complete: every namespace sees one version.\n", final.Resource, final.Source)
	return nil
}

// waitRollout reads the status every rolloutPollInterval until the rollout
// completes or its candidate becomes audit-only, or w.timeout passes.
func (o *options) waitRollout(ctx context.Context, r *rollout, w rolloutWait, read func(context.Context) (*RolloutStatus, error), seen func(*RolloutStatus)) (*RolloutStatus, error) {
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	var st *RolloutStatus
	err := wait.PollUntilContextCancel(ctx, rolloutPollInterval, false, func(ctx context.Context) (bool, error) {
		next, err := read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, err
		}
		st = next
		if seen != nil {
			seen(st)
		}
		return st.complete() || st.auditOnly(), nil
	})
	if errors.Is(err, context.DeadlineExceeded) && w.timeout > 0 {
		return nil, fmt.Errorf("timed out waiting for the rollout of %s/%s: its candidate is still open", r.namespace, r.name)
	}
	return st, err
}
