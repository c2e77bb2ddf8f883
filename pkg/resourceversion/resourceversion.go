package resourceversion

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Version is a parsed resourceVersion.
type Version struct {
	// Fingerprint names the merge semantics and configuration.
	Fingerprint uint64
	// Vector holds one revision per source, in the order of their keys.
	Vector []uint64
	// Mid, when set, places the version inside one change's events.
	Mid *Mid
	// Seq is the issuing replica's hint (0: none).
	Seq uint64
}

// Mid is a position inside the view events of one upstream change: of
// source K, from revision Prev to Vector[K] (and of the sources in Also,
// each from its own Prev).
type Mid struct {
	K         int
	Prev      uint64
	Index     int
	Namespace string
	// Also are the further sources the change moved, K ascending, all
	// after K: the difference a resume sends moves several at once.
	Also []Part
}

// Part is a source, by its index in the vector, at a revision.
type Part struct {
	K    int
	Prev uint64
}

// Before returns the vector before the change a Mid version is inside:
// Vector with component K at Prev, and each of Also at its Prev. For a
// version without Mid, Vector.
func (v Version) Before() []uint64 {
	if v.Mid == nil {
		return v.Vector
	}
	out := slices.Clone(v.Vector)
	out[v.Mid.K] = v.Mid.Prev
	for _, a := range v.Mid.Also {
		out[a.K] = a.Prev
	}
	return out
}

// Moved returns the sources the change a Mid is inside moved, K and Also's.
func (m *Mid) Moved() []Part {
	return append([]Part{{K: m.K, Prev: m.Prev}}, m.Also...)
}

// sameChange reports whether two Mids are inside the same change: the same
// sources moved from the same revisions.
func (m *Mid) sameChange(o *Mid) bool {
	return m.K == o.K && m.Prev == o.Prev && slices.Equal(m.Also, o.Also)
}

// String prints v.
func (v Version) String() string {
	return string(AppendTail(AppendHead(make([]byte, 0, 32+8*len(v.Vector)), v.Fingerprint, v.Vector), v.Mid, v.Seq))
}

// AppendHead appends the part of a version's text that names the state,
// fingerprint and vector, to b: what the versions of one change's events
// share (String is AppendHead, then AppendTail).
func AppendHead(b []byte, fingerprint uint64, vector []uint64) []byte {
	b = append(b, 'f')
	b = strconv.AppendUint(b, fingerprint, 16)
	b = append(b, ".v"...)
	for i, c := range vector {
		if i > 0 {
			b = append(b, '-')
		}
		b = strconv.AppendUint(b, c, 10)
	}
	return b
}

// AppendTail appends the rest of a version's text, the position inside a
// change and the issuer's sequence, to b.
func AppendTail(b []byte, m *Mid, seq uint64) []byte {
	if m != nil {
		b = append(b, ".p"...)
		b = strconv.AppendInt(b, int64(m.K), 10)
		b = append(b, '-')
		b = strconv.AppendUint(b, m.Prev, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(m.Index), 10)
		b = append(b, '-')
		b = append(b, m.Namespace...)
		for i, a := range m.Also {
			if i == 0 {
				b = append(b, ".a"...)
			} else {
				b = append(b, '-')
			}
			b = strconv.AppendInt(b, int64(a.K), 10)
			b = append(b, '-')
			b = strconv.AppendUint(b, a.Prev, 10)
		}
	}
	if seq != 0 {
		b = append(b, ".s"...)
		b = strconv.AppendUint(b, seq, 16)
	}
	return b
}

var errMalformed = errors.New("not a resourceVersion of this server")

// Parse reads a version printed by String.
func Parse(s string) (Version, error) {
	var v Version
	parts := strings.Split(s, ".")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "f") || !strings.HasPrefix(parts[1], "v") {
		return v, errMalformed
	}
	fp, err := strconv.ParseUint(parts[0][1:], 16, 64)
	if err != nil {
		return v, errMalformed
	}
	v.Fingerprint = fp
	if parts[1] != "v" {
		for _, c := range strings.Split(parts[1][1:], "-") {
			n, err := strconv.ParseUint(c, 10, 64)
			if err != nil {
				return v, errMalformed
			}
			v.Vector = append(v.Vector, n)
		}
	}
	for _, p := range parts[2:] {
		switch {
		case strings.HasPrefix(p, "p") && v.Mid == nil && v.Seq == 0:
			f := strings.SplitN(p[1:], "-", 4)
			if len(f) != 4 || f[3] == "" {
				return v, errMalformed
			}
			k, err1 := strconv.Atoi(f[0])
			prev, err2 := strconv.ParseUint(f[1], 10, 64)
			idx, err3 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil || err3 != nil || k < 0 || k >= len(v.Vector) || idx < 0 || prev > v.Vector[k] {
				return v, errMalformed
			}
			v.Mid = &Mid{K: k, Prev: prev, Index: idx, Namespace: f[3]}
		case strings.HasPrefix(p, "a") && v.Mid != nil && v.Mid.Also == nil && v.Seq == 0:
			f := strings.Split(p[1:], "-")
			if len(f)%2 != 0 {
				return v, errMalformed
			}
			last := v.Mid.K
			for i := 0; i < len(f); i += 2 {
				k, err1 := strconv.Atoi(f[i])
				prev, err2 := strconv.ParseUint(f[i+1], 10, 64)
				if err1 != nil || err2 != nil || k <= last || k >= len(v.Vector) || prev > v.Vector[k] {
					return v, errMalformed
				}
				v.Mid.Also = append(v.Mid.Also, Part{K: k, Prev: prev})
				last = k
			}
		case strings.HasPrefix(p, "s") && v.Seq == 0:
			seq, err := strconv.ParseUint(p[1:], 16, 64)
			if err != nil || seq == 0 {
				return v, errMalformed
			}
			v.Seq = seq
		default:
			return v, errMalformed
		}
	}
	return v, nil
}

// IsVersion reports whether s parses as a version.
func IsVersion(s string) bool {
	_, err := Parse(s)
	return err == nil
}

// Order is how a version relates to another.
type Order int

const (
	// Older: every state the other names includes this one's changes.
	Older Order = iota
	// Same: the same state (whichever replica issued either).
	Same
	// Newer: this one includes every change of the other, and more.
	Newer
	// Concurrent: each has changes the other lacks (some of this one's
	// components are ahead, some behind).
	Concurrent
	// Incomparable: of another fingerprint (another binary's semantics or
	// another configuration), or not a version: no order can be told.
	Incomparable
)

func (o Order) String() string {
	return [...]string{"Older", "Same", "Newer", "Concurrent", "Incomparable"}[o]
}

// Compare orders a against b. A version inside a change (Mid) is older
// than the state after the change, and newer than every state before it.
func Compare(a, b Version) Order {
	if a.Fingerprint != b.Fingerprint || len(a.Vector) != len(b.Vector) {
		return Incomparable
	}
	less, more := false, false
	for i := range a.Vector {
		switch {
		case a.Vector[i] < b.Vector[i]:
			less = true
		case a.Vector[i] > b.Vector[i]:
			more = true
		}
	}
	switch {
	case less && more:
		return Concurrent
	case less:
		return Older
	case more:
		return Newer
	}
	// The same vector: a position inside its last change is older.
	switch {
	case a.Mid == nil && b.Mid == nil:
		return Same
	case a.Mid != nil && b.Mid == nil:
		return Older
	case a.Mid == nil && b.Mid != nil:
		return Newer
	case !a.Mid.sameChange(b.Mid):
		return Concurrent
	case a.Mid.Namespace == b.Mid.Namespace && a.Mid.Index == b.Mid.Index:
		return Same
	case a.Mid.Namespace < b.Mid.Namespace || a.Mid.Namespace == b.Mid.Namespace && a.Mid.Index < b.Mid.Index:
		return Older
	}
	return Newer
}

// CompareStrings parses both and compares them; a text that does not
// parse is Incomparable.
func CompareStrings(a, b string) Order {
	va, err := Parse(a)
	if err != nil {
		return Incomparable
	}
	vb, err := Parse(b)
	if err != nil {
		return Incomparable
	}
	return Compare(va, vb)
}

// AtLeast reports whether the vector have has reached every component of
// want (NotOlderThan: component-wise at or past).
func AtLeast(have, want []uint64) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if have[i] < want[i] {
			return false
		}
	}
	return true
}
