package wirehold

import (
	"net"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// maxHeld is how many bytes a Conn holds at most: past it, they are
// written with the write that would exceed it.
const maxHeld = 64 << 10

// Conn is a connection whose writes are held while it has holds and
// written in one call when the last ends, or MaxHold after the first held
// byte, whichever comes first. Bytes are written in the order they were
// given, and a Write returns as soon as they are held: an error writing
// them is returned by a later Write, and closes the connection.
type Conn struct {
	net.Conn
	clock   clock.WithDelayedExecution
	maxHold time.Duration
	onClose func()

	// wmu orders the writes to the connection: a writer takes it before
	// mu and takes the held bytes under mu, so no later bytes pass them.
	wmu sync.Mutex

	mu      sync.Mutex
	holds   int
	held    []byte
	spare   []byte
	timer   clock.Timer
	err     error
	closed  bool
	expired int
}

// NewConn wraps c. onClose, if set, runs once when it is closed.
func NewConn(c net.Conn, clk clock.WithDelayedExecution, maxHold time.Duration, onClose func()) *Conn {
	return &Conn{Conn: c, clock: clk, maxHold: maxHold, onClose: onClose}
}

// Hold delays the connection's writes until Release.
func (c *Conn) Hold() {
	c.mu.Lock()
	c.holds++
	c.mu.Unlock()
}

// Release ends n holds; when none is left, the held bytes are written,
// by this goroutine.
func (c *Conn) Release(n int) {
	if c.release(n) {
		c.flush(false)
	}
}

// ReleaseLater is Release for a goroutine that must not wait for the
// connection (the fan-out): the held bytes are written by another.
func (c *Conn) ReleaseLater(n int) {
	if c.release(n) {
		go c.flush(false)
	}
}

func (c *Conn) release(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holds -= n
	if c.holds < 0 {
		// Not expected: a release without its hold. Never hold forever.
		c.holds = 0
	}
	return c.holds == 0 && len(c.held) > 0
}

// Write holds p while the connection has holds and room, else writes
// what it holds and p.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	if c.holds > 0 && !c.closed && len(c.held)+len(p) <= maxHeld {
		if len(c.held) == 0 && c.maxHold > 0 {
			c.timer = c.clock.AfterFunc(c.maxHold, c.expire)
		}
		c.held = append(c.held, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()

	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if len(c.held) == 0 {
		c.mu.Unlock()
		n, err := c.Conn.Write(p)
		c.failed(err)
		return n, err
	}
	out := append(c.takeLocked(), p...)
	c.mu.Unlock()
	_, err := c.Conn.Write(out)
	c.failed(err)
	c.giveBack(out)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// expire writes what is held, holds or not: a hold that outlasts
// maxHold (a stream waiting for flow control) delays nobody longer.
// It runs on the clock's goroutine (a fake clock's Step): the write is
// another's.
func (c *Conn) expire() {
	c.mu.Lock()
	c.expired++
	c.timer = nil
	c.mu.Unlock()
	go c.flush(true)
}

// flush writes the held bytes; unless force, only if no hold is left.
func (c *Conn) flush(force bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if len(c.held) == 0 || (!force && c.holds > 0) {
		c.mu.Unlock()
		return
	}
	out := c.takeLocked()
	c.mu.Unlock()
	_, err := c.Conn.Write(out)
	c.failed(err)
	c.giveBack(out)
}

// takeLocked returns the held bytes and stops the timer. Called with mu
// held.
func (c *Conn) takeLocked() []byte {
	out := c.held
	c.held = c.spare[:0]
	c.spare = nil
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	return out
}

// giveBack keeps a written buffer for the next held bytes.
func (c *Conn) giveBack(b []byte) {
	if cap(b) > 2*maxHeld {
		return
	}
	c.mu.Lock()
	c.spare = b[:0]
	c.mu.Unlock()
}

// failed remembers a write error, for the next Write, and closes the
// connection: bytes were lost, and a Write that returned nil held them.
func (c *Conn) failed(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	_ = c.Conn.Close()
}

// Close writes what is held, unless a write is under way (then the
// connection is stuck and closing it is what ends that write), and closes
// the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.Conn.Close()
	}
	c.closed = true
	c.mu.Unlock()
	if c.wmu.TryLock() {
		c.mu.Lock()
		out := c.takeLocked()
		c.mu.Unlock()
		if len(out) > 0 {
			_, _ = c.Conn.Write(out)
		}
		c.wmu.Unlock()
	}
	if c.onClose != nil {
		c.onClose()
	}
	return c.Conn.Close()
}

// Expired returns how many times held bytes were written because a hold
// outlasted maxHold.
func (c *Conn) Expired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expired
}
