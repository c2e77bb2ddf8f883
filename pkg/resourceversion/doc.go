// Package resourceversion owns the text of implicit-apiserver's
// resourceVersions: Version, its Parse and String, and how two versions
// compare. pkg/watchmux issues and resumes from them; pkg/registry and the
// tests read them.
//
// Package resourceversion is the text of the views' resourceVersions: what
// upstream state a version names, and how two versions compare. It is a
// leaf: pkg/watchmux issues versions, pkg/registry orders them (lists,
// continue tokens), and neither needs the other for it.
//
// A version names a state of the sources by a vector of upstream
// positions, one etcd revision per source informer (the namespaces, each
// source kind, each hub kind), in the order of the sources' keys. Two
// replicas at the same vector, with the same fingerprint (the binary's merge
// semantics and the configuration), serve the same views; so any replica at
// or past a vector can serve a watch from it.
//
// The text, never digits only (two vectors can be incomparable, and a
// client that compares decimal versions would misorder them):
//
//		f<fingerprint>.v<c1>-<c2>-...-<cn>[.p<k>-<prev>-<index>-<namespace>[.a<k>-<prev>...]][.s<seq>]
//
//	  - f: the fingerprint, hexadecimal.
//	  - v: the vector, decimal revisions (0: the source has no objects seen).
//	  - p: a position inside the view events of one upstream change, of
//	    source k (its index in the vector) from revision prev to v's: every
//	    namespace before namespace (in name order) shows the view at v, every
//	    namespace after it the view at the vector with component k at prev,
//	    and namespace itself the first index+1 events of that change (by
//	    name). Absent: the state at v itself.
//	  - a: further sources the change moved, each from its own prev (source
//	    index ascending, none of them p's k): a resume's difference between
//	    two versions moves every source the client's version is behind in,
//	    at once. The state before the change has each of them at its prev.
//	  - s: a hint for the replica that issued it (the sequence number of its
//	    own history, hexadecimal, its instance in the high bits), which
//	    resumes from its history without recomputing; others ignore it.
//
// Every character is in [a-z0-9.-]: a version splices into JSON as it is.
//
// It is a leaf: it imports the standard library only and must not import
// anything of this module.
package resourceversion
