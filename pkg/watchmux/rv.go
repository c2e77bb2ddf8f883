package watchmux

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
)

// A resourceVersion is instance<<counterBits | counter, printed in decimal.
// instance is random per process start, so versions of another replica or
// of an earlier run of this one are told apart (with odds of 1 in 2^22 of a
// collision); counter counts view events. Keeping below 2^63 lets clients
// that parse versions as int64 read them.
const (
	counterBits = 40
	counterMask = 1<<counterBits - 1
	instanceMax = 1 << (63 - counterBits - 1)
)

// versions issues the resourceVersions of one instance.
type versions struct {
	instance uint64
	counter  uint64
}

// newVersions returns the versions of a new instance. A Mux that runs out of
// versions starts a new instance with newVersionsExcept(its old one).
func newVersions() versions { return newVersionsExcept(0) }

func newVersionsExcept(old uint64) versions {
	for {
		v := randomVersions()
		if v.instance != old {
			return v
		}
	}
}

func randomVersions() versions {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("watchmux: reading random instance id: %v", err))
	}
	// Never 0, so a version is never mistaken for "0" (any) or small numbers.
	return versions{instance: binary.BigEndian.Uint64(b[:])%(instanceMax-1) + 1}
}

// next returns the next version; ok is false when the counter space is
// exhausted (2^40 events), after which the caller must start a new instance.
func (v *versions) next() (uint64, bool) {
	if v.counter == counterMask {
		return 0, false
	}
	v.counter++
	return v.current(), true
}

// reserve issues n versions at once and returns the first; ok is false when
// the counter space can't hold them, as for next.
func (v *versions) reserve(n uint64) (first uint64, ok bool) {
	if n == 0 || n > counterMask-v.counter {
		return 0, false
	}
	first = v.current() + 1
	v.counter += n
	return first, true
}

// current is the latest version issued (the instance's base before any).
func (v *versions) current() uint64 { return v.instance<<counterBits | v.counter }

// rvState classifies a client's resourceVersion against this instance.
type rvState int

const (
	rvAny     rvState = iota // "" or "0": any state will do
	rvOurs                   // issued by this instance, not in the future
	rvForeign                // another instance's, or garbage: 410 Gone
	rvFuture                 // this instance's, but not issued yet
)

// classify parses a client's resourceVersion.
func (v *versions) classify(s string) (rvState, uint64) {
	if s == "" || s == "0" {
		return rvAny, 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n>>counterBits != v.instance {
		return rvForeign, 0
	}
	if n > v.current() {
		return rvFuture, n
	}
	return rvOurs, n
}

// format prints a version.
func format(rv uint64) string { return strconv.FormatUint(rv, 10) }

// Order is how a client's resourceVersion relates to a current one.
type Order int

const (
	// Older: issued by the same instance before current.
	Older Order = iota
	// Same: current itself.
	Same
	// Newer: of the same instance, not issued yet.
	Newer
	// Incomparable: of another instance (a replica, an earlier run), or
	// not a version at all: no order can be told.
	Incomparable
)

// CompareVersions orders the version v against current, both printed by
// this package (current as a list or event carries it). Only versions of
// one instance are ordered: a version of another one is Incomparable
// however its number compares, as Watch answers it 410 Gone.
func CompareVersions(v, current string) Order {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || v != format(n) {
		return Incomparable
	}
	cur, err := strconv.ParseUint(current, 10, 64)
	if err != nil || n>>counterBits != cur>>counterBits {
		return Incomparable
	}
	switch {
	case n < cur:
		return Older
	case n == cur:
		return Same
	}
	return Newer
}
