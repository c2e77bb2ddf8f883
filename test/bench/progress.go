package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress is a plain-text progress bar on stderr, one line per step:
//
//	[#####.....] 12/40 propagation N=5000 G=100 (3m12s)
type progress struct {
	mu    sync.Mutex
	out   io.Writer
	total int
	done  int
	start time.Time
}

func newProgress(out io.Writer, total int) *progress {
	return &progress{out: out, total: total, start: time.Now()}
}

// step counts one step done and prints what comes next.
func (p *progress) step(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = min(p.done+1, p.total)
	p.printLocked(fmt.Sprintf(format, args...))
}

// show prints the bar at the current count, with what is under way.
func (p *progress) show(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printLocked(fmt.Sprintf(format, args...))
}

func (p *progress) printLocked(what string) {
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	fmt.Fprintf(p.out, "[%s%s] %d/%d %s (%s)\n", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.done, p.total, what, time.Since(p.start).Round(time.Second))
}
