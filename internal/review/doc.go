// Package review reads and answers the reviews kube-apiserver POSTs to
// implicit-apiserver's webhooks: the AdmissionReviews of the guards
// (pkg/admission) and the SubjectAccessReviews of the authorization webhook
// (pkg/authz).
//
// It owns only the HTTP exchange (method, size bound, JSON decoding and
// encoding, the review's apiVersion and kind); what each webhook decides
// stays in its package.
package review
