package registry

import (
	"context"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// A review that answers for another user (spec.user) asks what
// kube-apiserver's impersonation asks before it lets the requester act as
// that user (k8s.io/apiserver pkg/endpoints/filters/impersonation, the
// impersonate verb), and answers for the identity it would then build: only
// who could act as them, and see what they see, reads their answer.

// impersonationQuestions are the questions kube-apiserver asks, in its
// order, before requester may act as want: impersonate on the user
// (serviceaccounts NAME in NS for system:serviceaccount:NS:NAME, users
// otherwise; core group), on its uid (uids), on each group (groups, core),
// and on each extra value (userextras/<key>, the value as name; both of
// authentication.k8s.io). Extra keys are taken in sorted order.
func impersonationQuestions(requester user.Info, want user.Info) []authorizer.AttributesRecord {
	ask := func(gv schema.GroupVersion, resource, subresource, namespace, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{
			User: requester, Verb: "impersonate", APIGroup: gv.Group, APIVersion: gv.Version,
			Resource: resource, Subresource: subresource, Namespace: namespace, Name: name, ResourceRequest: true,
		}
	}
	var out []authorizer.AttributesRecord
	if ns, name, err := serviceaccount.SplitUsername(want.GetName()); err == nil {
		out = append(out, ask(corev1.SchemeGroupVersion, "serviceaccounts", "", ns, name))
	} else {
		out = append(out, ask(corev1.SchemeGroupVersion, "users", "", "", want.GetName()))
	}
	if uid := want.GetUID(); uid != "" {
		out = append(out, ask(authenticationv1.SchemeGroupVersion, "uids", "", "", uid))
	}
	for _, g := range want.GetGroups() {
		out = append(out, ask(corev1.SchemeGroupVersion, "groups", "", "", g))
	}
	extra := want.GetExtra()
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range extra[k] {
			out = append(out, ask(authenticationv1.SchemeGroupVersion, "userextras", k, "", v))
		}
	}
	return out
}

// impersonatedIdentity is the identity kube-apiserver builds for want once
// allowed: a ServiceAccount given no groups gets its fixed ones
// (system:serviceaccounts, system:serviceaccounts:NS); anonymous is
// unauthenticated; anyone else is authenticated unless the groups say
// unauthenticated.
func impersonatedIdentity(want user.Info) *user.DefaultInfo {
	out := &user.DefaultInfo{Name: want.GetName(), UID: want.GetUID(), Groups: slices.Clone(want.GetGroups()), Extra: want.GetExtra()}
	if ns, _, err := serviceaccount.SplitUsername(want.GetName()); err == nil && len(out.Groups) == 0 {
		out.Groups = serviceaccount.MakeGroupNames(ns)
	}
	switch {
	case out.Name == user.Anonymous:
		if !slices.Contains(out.Groups, user.AllUnauthenticated) {
			out.Groups = append(out.Groups, user.AllUnauthenticated)
		}
	case !slices.Contains(out.Groups, user.AllUnauthenticated) && !slices.Contains(out.Groups, user.AllAuthenticated):
		out.Groups = append(out.Groups, user.AllAuthenticated)
	}
	return out
}

// impersonate asks impersonationQuestions for the requester of ctx, one
// at a time, and returns the identity kube-apiserver would act as; a
// refusal is 403 naming the question refused.
func impersonate(ctx context.Context, authz authorizer.UnconditionalAuthorizer, want user.Info) (*user.DefaultInfo, error) {
	requester, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user in the request")
	}
	for _, q := range impersonationQuestions(requester, want) {
		gr := schema.GroupResource{Group: q.APIGroup, Resource: q.Resource}
		if authz == nil {
			return nil, apierrors.NewForbidden(gr, q.Name, fmt.Errorf("no authorizer to check impersonate"))
		}
		decision, reason, err := authz.Authorize(ctx, q)
		if decision == authorizer.DecisionAllow {
			continue
		}
		what := gr.String()
		if q.Subresource != "" {
			what += "/" + q.Subresource
		}
		msg := fmt.Sprintf("user %q cannot impersonate %s %q", requester.GetName(), what, q.Name)
		if q.Namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", q.Namespace)
		}
		if reason != "" {
			msg += ": " + reason
		}
		if err != nil {
			msg += fmt.Sprintf(" (%v)", err)
		}
		return nil, apierrors.NewForbidden(gr, q.Name, fmt.Errorf("%s", msg))
	}
	return impersonatedIdentity(want), nil
}
