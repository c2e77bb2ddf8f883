package kindcontroller

import "fmt"

// crdGone is the error of a poll that found no CustomResourceDefinition for
// a kind served from one (known.fromCRD): deleted (and maybe created again)
// while the host's discovery and OpenAPI still list the kind, or not
// readable for a moment. Taking that read as "no columns" would serve the
// view without the CRD's printer columns until the next poll after the CRD
// is back, while the view itself never stops answering (fail-static); so
// the kind keeps what was read, as for any read of a served kind that
// fails. A kind that never had a CRD (built in or aggregated) is not
// affected.
func crdGone(known *servedKind, res resolved) error {
	if !known.fromCRD || res.fromCRD {
		return nil
	}
	return errNotYet{fmt.Sprintf("the CustomResourceDefinition of %s is not there (deleted, or not readable) though the host still lists the kind", known.kind.Source.GroupResource())}
}
