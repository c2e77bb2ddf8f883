package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// lines records each line written and when (in the bubble's fake time).
type lines struct {
	start time.Time
	text  []string
	at    []time.Duration
	buf   bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.text = append(l.text, strings.TrimSuffix(line, "\n"))
		l.at = append(l.at, time.Since(l.start))
	}
}

// TestStepSaysWhatItDoes fakes a slow first build (a step that takes six
// minutes and more of the bubble's fake clock) and checks what someone watching
// sees: what is built and why at once, a line at least every 30 s saying
// it is still at it, and the end.
func TestStepSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		takes     time.Duration
		err       error
		wantFirst string
		wantLast  string
		wantLines int
	}{
		{
			name:      "a slow first build",
			takes:     6*time.Minute + 10*time.Second,
			wantFirst: ">> building implicit-apiserver for make run; a first build takes about 6 minutes on 2 cores, later ones are cached",
			wantLast:  ">> done building implicit-apiserver in 6m10s",
			wantLines: 1 + 18 + 1, // what and why, every 20 s until 6:00, done
		},
		{
			name:      "a cached build",
			takes:     2 * time.Second,
			wantFirst: ">> building implicit-apiserver for make run; a first build takes about 6 minutes on 2 cores, later ones are cached",
			wantLast:  ">> done building implicit-apiserver in 2s",
			wantLines: 2,
		},
		{
			name:      "a failed build",
			takes:     45 * time.Second,
			err:       errors.New("exit status 1"),
			wantFirst: ">> building implicit-apiserver for make run; a first build takes about 6 minutes on 2 cores, later ones are cached",
			wantLast:  ">> building implicit-apiserver failed after 45s",
			wantLines: 4,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				out := &lines{start: time.Now()}
				s := step{what: "building implicit-apiserver", why: "make run", expect: "about 6 minutes on 2 cores", every: DefaultEvery}
				err := s.run(t.Context(), out, func(context.Context) error {
					time.Sleep(tc.takes) // on purpose: the build takes tc.takes of the bubble's clock
					return tc.err
				})
				if !errors.Is(err, tc.err) {
					t.Fatalf("run: %v, want %v", err, tc.err)
				}
				t.Logf("output:\n%s", strings.Join(out.text, "\n"))
				if len(out.text) != tc.wantLines {
					t.Errorf("%d lines, want %d", len(out.text), tc.wantLines)
				}
				if out.text[0] != tc.wantFirst || out.at[0] != 0 {
					t.Errorf("first line %q at %s, want %q at once", out.text[0], out.at[0], tc.wantFirst)
				}
				if last := out.text[len(out.text)-1]; last != tc.wantLast {
					t.Errorf("last line %q, want %q", last, tc.wantLast)
				}
				for i := 1; i < len(out.at); i++ {
					if gap := out.at[i] - out.at[i-1]; gap > 30*time.Second {
						t.Errorf("silent for %s before %q", gap, out.text[i])
					}
				}
				for _, line := range out.text[1 : len(out.text)-1] {
					if !strings.HasPrefix(line, ">> still building implicit-apiserver for make run: ") || !strings.HasSuffix(line, " so far (a first build takes about 6 minutes on 2 cores)") {
						t.Errorf("progress line %q does not say what, why and how long so far", line)
					}
				}
			})
		})
	}
}

// TestStepStopsWithItsContext: a step cancelled (Ctrl-C) ends when its
// command ends, and prints nothing after.
func TestStepStopsWithItsContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		out := &lines{start: time.Now()}
		s := step{what: "building etcd", why: "make run", every: DefaultEvery}
		time.AfterFunc(50*time.Second, cancel)
		err := s.run(ctx, out, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v, want context.Canceled", err)
		}
		want := []string{
			">> building etcd for make run",
			">> still building etcd for make run: 20s so far",
			">> still building etcd for make run: 40s so far",
			">> building etcd failed after 50s",
		}
		if strings.Join(out.text, "\n") != strings.Join(want, "\n") {
			t.Errorf("output:\n%s\nwant:\n%s", strings.Join(out.text, "\n"), strings.Join(want, "\n"))
		}
	})
}
