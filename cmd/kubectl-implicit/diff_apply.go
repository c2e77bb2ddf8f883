package main

import (
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/openapi3"
	kdiff "k8s.io/kubectl/pkg/cmd/diff"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/scheme"
)

// applyMode is how diff applies the files, as kubectl diff (and kubectl
// apply) take it: client-side apply (a three-way patch) or server-side
// apply, under a field manager.
type applyMode struct {
	serverSide     bool
	fieldManager   string
	forceConflicts bool
}

// Field managers kubectl apply writes with by default.
const (
	clientSideFieldManager = "kubectl-client-side-apply"
	serverSideFieldManager = "kubectl"
)

// appliedEdit is one object of the files and what applying it would write.
type appliedEdit struct {
	info *resource.Info
	// live is the object now (nil: it does not exist).
	live *unstructured.Unstructured
	// merged is what kubectl apply would store (nil: a deletion), as the
	// server answered the dry run: defaults, other managers' fields and
	// admission's mutations included.
	merged *unstructured.Unstructured
}

// maxApplyRetries is how often an apply dry run is retried when the object
// changes under it, as kubectl diff retries; the last try is without the
// resourceVersion precondition.
const maxApplyRetries = 4

// dryRunApply computes what `kubectl apply -f` (with mode) would write for
// info, the way kubectl diff does and with its own machinery
// (k8s.io/kubectl's InfoObject.Merged): a server-side dry run of the create,
// the client-side apply patch or the server-side apply patch. The server's
// validation and admission judge it, implicit-apiserver's guards included,
// so an immutable field, a guard's refusal or a forbidden write is the
// error the real apply would get.
func dryRunApply(f cmdutil.Factory, info *resource.Info, mode applyMode, errOut io.Writer) (*appliedEdit, error) {
	local := info.Object.DeepCopyObject()
	obj := kdiff.InfoObject{
		LocalObj:        local,
		Info:            info,
		Encoder:         scheme.DefaultJSONEncoder(),
		ServerSideApply: mode.serverSide,
		FieldManager:    mode.fieldManager,
		ForceConflicts:  mode.forceConflicts,
	}
	obj.IOStreams.ErrOut = errOut
	if !mode.serverSide {
		// The client-side patch of a kind without a Go type (a CRD's) is a
		// JSON merge patch; with Go types a strategic merge patch, whose
		// keys come from OpenAPI, as kubectl diff reads them.
		obj.OpenAPIGetter = f
		if c, err := f.OpenAPIV3Client(); err == nil {
			obj.OpenAPIV3Root = openapi3.NewRoot(c)
		}
	}
	var err error
	for i := 1; i <= maxApplyRetries; i++ {
		if err = info.Get(); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			info.Object = nil
		}
		obj.Info = info
		obj.Force = i == maxApplyRetries
		var merged runtime.Object
		merged, err = obj.Merged()
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		edit := &appliedEdit{info: info}
		if edit.merged, err = toUnstructured(merged); err != nil {
			return nil, err
		}
		if info.Object != nil {
			if edit.live, err = toUnstructured(info.Object); err != nil {
				return nil, err
			}
		}
		return edit, nil
	}
	return nil, err
}

// dryRunDelete sends the deletion of info as a server-side dry run, so the
// guards judge it (a locked source's deletion is refused) as they would
// judge `kubectl delete -f`.
func dryRunDelete(info *resource.Info) (*appliedEdit, error) {
	helper := resource.NewHelper(info.Client, info.Mapping).DryRun(true)
	if _, err := helper.DeleteWithOptions(info.Namespace, info.Name, &metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	if err := info.Get(); err != nil {
		return nil, err
	}
	live, err := toUnstructured(info.Object)
	if err != nil {
		return nil, err
	}
	return &appliedEdit{info: info, live: live}, nil
}

// toUnstructured converts a server's answer into an Unstructured.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if obj == nil {
		return nil, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting the dry run's answer: %w", err)
	}
	return &unstructured.Unstructured{Object: content}, nil
}
