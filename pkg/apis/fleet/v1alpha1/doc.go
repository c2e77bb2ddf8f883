// Package v1alpha1 is the fleet.implicit.dev/v1alpha1 API: the reports a
// member cluster's implicit-apiserver keeps on its hub.
//
// It is a CustomResourceDefinition on the hub (artifacts/fleet/hub), not a
// group implicit-apiserver serves: the hub need not run one. The hub's
// admin registers each member by creating its MemberCluster, with the
// labels cluster stages select on; the member may only update the status
// of its own (RBAC: update on memberclusters/status with resourceNames),
// and a CRD's status subresource ignores every change but the status', so
// a member can neither register itself nor change its labels.
//
// The types are plain structs read and written as unstructured objects
// (runtime.DefaultUnstructuredConverter): nothing serves them in Go.
package v1alpha1
