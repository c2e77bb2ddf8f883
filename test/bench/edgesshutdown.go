package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// The shutdown's timeline (-edges): where the time between SIGTERM and the
// exit goes. From outside, every 50 ms, the server's sockets of its port
// (kube-apiserver's connections to it) that it has not closed yet; from its
// log, k8s.io/apiserver's "[graceful-termination]" events.

// shutdownStep is one moment of the shutdown, after SIGTERM.
type shutdownStep struct {
	After time.Duration `json:"after"`
	What  string        `json:"what"`
}

// socketSampler samples the server's open sockets until stopped.
type socketSampler struct {
	port    int
	start   time.Time
	stop    chan struct{}
	done    chan struct{}
	atStart int
	// lastOpen is the last sample that found a socket the server had not
	// closed (ESTABLISHED or CLOSE_WAIT on its side), allClosed the first
	// sample after it that found none.
	lastOpen, allClosed time.Duration
	// established: when the last socket stopped being ESTABLISHED (the
	// client, or the server, began to close it).
	lastEstablished time.Duration
}

func startSocketSampler(port int, start time.Time) *socketSampler {
	s := &socketSampler{port: port, start: start, stop: make(chan struct{}), done: make(chan struct{})}
	est, wait := serverSockets(port)
	s.atStart = est + wait
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			est, wait := serverSockets(port)
			now := time.Since(s.start)
			if est > 0 {
				s.lastEstablished = now
			}
			if est+wait > 0 {
				s.lastOpen, s.allClosed = now, 0
			} else if s.allClosed == 0 {
				s.allClosed = now
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *socketSampler) finish() { close(s.stop); <-s.done }

// serverSockets counts the sockets on the server's side of port:
// ESTABLISHED, and CLOSE_WAIT (the client closed, the server not yet).
func serverSockets(port int) (established, closeWait int) {
	local := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		body, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(body), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 4 || !strings.HasSuffix(fields[1], local) {
				continue
			}
			switch fields[3] {
			case "01":
				established++
			case "08":
				closeWait++
			}
		}
	}
	return established, closeWait
}

// klogLine is a klog header: I1129 08:50:01.123456 ...
var klogLine = regexp.MustCompile(`^[IWE](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6})`)

// gracefulSteps reads the server's log for k8s.io/apiserver's
// "[graceful-termination]" lines (and this server's own shutdown lines)
// written from start on, as times after start.
func gracefulSteps(logPath string, start time.Time) []shutdownStep {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []shutdownStep
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "graceful-termination") && !strings.Contains(line, "Shutdown:") {
			continue
		}
		m := klogLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t, err := time.ParseInLocation("2006 0102 15:04:05.000000", fmt.Sprintf("%d %s%s %s", start.Year(), m[1], m[2], m[3]), time.Local)
		if err != nil || t.Before(start.Add(-time.Second)) {
			continue
		}
		_, msg, _ := strings.Cut(line, "] ")
		out = append(out, shutdownStep{After: t.Sub(start), What: msg})
	}
	return out
}

// timelineMarkdown is the shutdown's steps in order, as table rows.
func timelineMarkdown(steps []shutdownStep) string {
	var sb strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&sb, "| shutdown +%.2f s | %s |\n", s.After.Seconds(), strings.ReplaceAll(s.What, "|", "/"))
	}
	return sb.String()
}

// processRSS is pid's VmRSS from /proc ("?" if unreadable).
func processRSS(pid int) string {
	body, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
