package watchmux

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
)

// A sequence number is instance<<counterBits | counter: it numbers the view
// events of one instance, for its history and fan-out. instance is random
// per process start, so the hint a resourceVersion carries (see
// pkg/resourceversion) is recognized by the instance that issued it only
// (with odds of 1 in 2^22 of a collision); counter counts view events.
const (
	counterBits = 40
	counterMask = 1<<counterBits - 1
	instanceMax = 1 << (63 - counterBits - 1)
)

// versions issues the sequence numbers of one instance.
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

// ours reports whether seq is a sequence number this instance issued: its
// history orders it against every other.
func (v *versions) ours(seq uint64) bool {
	return seq != 0 && seq>>counterBits == v.instance && seq <= v.current()
}

// format prints a sequence number, for events without a change's version
// (tests that build events by hand).
func format(rv uint64) string { return strconv.FormatUint(rv, 10) }
