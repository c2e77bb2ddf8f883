package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func (o *options) exceptionRequestCommand() *cobra.Command {
	var exclude []string
	var reason, expires string
	cmd := &cobra.Command{
		Use:   "request NAME -n NAMESPACE --exclude RESOURCE/NAME[,...] --reason TEXT [--expires DURATION|RFC3339]",
		Short: "Request an exception: write it in the namespace's implicit.dev/exceptions annotation, as you",
		Long: `Request an exception of inherited items in a namespace (and its subtree):
it is written, as you, in the namespace's implicit.dev/exceptions annotation
with requestedBy your user name (a SelfSubjectReview), replacing one of the
same name. Where a source it excepts requires approval, it takes effect
only once someone else allowed "approve" on that source approves this
version (kubectl implicit exceptions approve); where it requires an end,
--expires is required, within the source's maximum.`,
		Example: `  kubectl implicit exceptions request ci-bot -n team-a --exclude rolebindings/ci-bot --reason "TICKET-123" --expires 168h
  kubectl implicit exceptions request no-netpol -n team-a --exclude networkpolicies/* --reason "migration" --expires 2026-12-31T00:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := v1alpha1.ExceptionSpec{Name: args[0], Reason: reason}
			for _, e := range exclude {
				for _, entry := range strings.Split(e, ",") {
					if entry = strings.TrimSpace(entry); entry != "" {
						spec.Exclude = append(spec.Exclude, entry)
					}
				}
			}
			if expires != "" {
				ends, err := parseEnd(expires, time.Now())
				if err != nil {
					return err
				}
				spec.ExpiresAt = &metav1.Time{Time: ends}
			}
			return o.requestException(cmd, spec)
		},
	}
	cmd.Flags().StringSliceVar(&exclude, "exclude", nil, "The inherited items to except: RESOURCE/NAME or RESOURCE/*, comma-separated or repeated.")
	cmd.Flags().StringVar(&reason, "reason", "", "Why (a ticket, a sentence). Required.")
	cmd.Flags().StringVar(&expires, "expires", "", "The exception's end: a duration from now (168h) or a time (RFC 3339).")
	return cmd
}

// parseEnd reads --expires: a duration from now, or an RFC 3339 time; to
// the second, as the annotation holds it.
func parseEnd(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires %s: must be in the future", v)
		}
		return now.Add(d).Truncate(time.Second).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires %q: neither a duration (168h) nor an RFC 3339 time (2026-12-31T00:00:00Z)", v)
	}
	return t.UTC(), nil
}

// requestException writes spec, requested by the current user, into the
// namespace's exceptions.
func (o *options) requestException(cmd *cobra.Command, spec v1alpha1.ExceptionSpec) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	kube, err := o.kubeClient()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if spec.RequestedBy, err = whoAmI(ctx, kube); err != nil {
		return err
	}
	if problems := merge.ValidateException(spec); len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	err = patchNamespaceAnnotation(ctx, kube, ns, v1alpha1.AnnotationExceptions, func(n *corev1.Namespace) (string, error) {
		var specs []v1alpha1.ExceptionSpec
		if v, ok := n.Annotations[v1alpha1.AnnotationExceptions]; ok {
			if specs, err = merge.ParseExceptions(v); err != nil {
				return "", err
			}
		}
		specs = slices.DeleteFunc(specs, func(s v1alpha1.ExceptionSpec) bool { return s.Name == spec.Name })
		specs = append(specs, spec)
		sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
		b, err := json.Marshal(specs)
		return string(b), err
	})
	if err != nil {
		return err
	}
	ends := "no end"
	if spec.ExpiresAt != nil {
		ends = "ends " + spec.ExpiresAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "exception %s requested in %s by %s (%s, digest %s)\n", spec.Name, ns, spec.RequestedBy, ends, merge.ExceptionDigest(spec))
	return nil
}

func (o *options) exceptionApproveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "approve NAME -n NAMESPACE",
		Short: "Approve an exception's current version for the sources of the items it names",
		Long: `Approve an exception as you: written in the namespace's
implicit.dev/exception-approvals with this version's digest (an edit of
the exception makes it requested again) and the source namespaces of the
items it names in the namespace's views (implicit.dev/source-namespace;
"<cluster>/<namespace>" for a hub's). The guards allow it only if you are
not its requester and may "approve" on each of those sources.`,
		Example: `  kubectl implicit exceptions approve ci-bot -n team-a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.approveException(cmd, args[0])
		},
	}
}

// approveException approves the exception's current version.
func (o *options) approveException(cmd *cobra.Command, name string) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	kube, err := o.kubeClient()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	user, err := whoAmI(ctx, kube)
	if err != nil {
		return err
	}
	var approval v1alpha1.ExceptionApproval
	err = patchNamespaceAnnotation(ctx, kube, ns, v1alpha1.AnnotationExceptionApprovals, func(n *corev1.Namespace) (string, error) {
		var e *merge.Exception
		for _, x := range merge.ExceptionsOf(merge.NamespaceOf(n)) {
			if x.Name == name {
				e = &x
				break
			}
		}
		if e == nil {
			return "", fmt.Errorf("namespace %s declares no exception %q (%s)", ns, name, v1alpha1.AnnotationExceptions)
		}
		sources, err := o.exceptionSources(ctx, ns, e.Exclude)
		if err != nil {
			return "", err
		}
		approvals := map[string]v1alpha1.ExceptionApproval{}
		if v, ok := n.Annotations[v1alpha1.AnnotationExceptionApprovals]; ok {
			if approvals, err = merge.ParseExceptionApprovals(v); err != nil {
				return "", err
			}
		}
		approval = v1alpha1.ExceptionApproval{By: user, At: metav1.Now().Rfc3339Copy(), Digest: e.Digest, Sources: sources}
		approvals[name] = approval
		b, err := json.Marshal(approvals)
		return string(b), err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "exception %s in %s approved by %s (digest %s, sources %s)\n", name, ns, user, approval.Digest, strings.Join(approval.Sources, ","))
	return nil
}

// exceptionSources are the source namespaces of the items the entries name
// in the namespace's views, sorted.
func (o *options) exceptionSources(ctx context.Context, ns string, entries []string) ([]string, error) {
	dyn, err := o.dynamicClient()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, entry := range entries {
		resource, name, ok := strings.Cut(entry, "/")
		if !ok {
			continue
		}
		items, err := dyn.Resource(gvr(resource)).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, it := range items.Items {
			if name != "*" && it.GetName() != name {
				continue
			}
			src := it.GetLabels()[v1alpha1.LabelSourceNamespace]
			if src == "" || src == ns {
				continue // the namespace's own object: nothing inherited
			}
			if c := it.GetAnnotations()[v1alpha1.AnnotationSourceCluster]; c != "" {
				src = c + "/" + src
			}
			if !slices.Contains(out, src) {
				out = append(out, src)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// whoAmI is the current user's name, as the server authenticates it.
func whoAmI(ctx context.Context, kube kubernetes.Interface) (string, error) {
	r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("who am I (SelfSubjectReview): %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// patchNamespaceAnnotation sets one annotation of the namespace to what
// value computes from it, with a JSON merge patch carrying the namespace's
// resourceVersion; on a conflict, read again and recomputed.
func patchNamespaceAnnotation(ctx context.Context, kube kubernetes.Interface, ns, key string, value func(*corev1.Namespace) (string, error)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		v, err := value(n)
		if err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": n.ResourceVersion,
			"annotations":     map[string]string{key: v},
		}})
		if err != nil {
			return err
		}
		_, err = kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	})
}
