package robustness

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// catchUpTimeout bounds the wait, at a quiet point, for every client and
// both replicas to agree.
const catchUpTimeout = 60 * time.Second

// holder is a client, by what it holds.
type holder struct {
	name, scope string
	holding     func() map[string]string
}

// quietCheck waits, up to catchUpTimeout, until both replicas list the
// same views, every item's source is a RoleBinding kube-apiserver holds at
// that uid and resourceVersion, a paginated list (two items a page, either
// replica) equals them, and every client holds exactly what they hold in
// its scope. It returns the differences left at the end of the wait.
func quietCheck(ctx context.Context, c *cluster, clients []holder, pg *pager) []string {
	deadline := time.Now().Add(catchUpTimeout)
	for {
		// Each attempt has its own time, so the last one's differences,
		// not a deadline that cut it, are what is reported.
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		last := agree(actx, c, clients, pg)
		cancel()
		if len(last) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return last
		}
		sleep(ctx, time.Second)
	}
}

func agree(ctx context.Context, c *cluster, clients []holder, pg *pager) []string {
	var fresh []map[string]string
	// sources are each item's source (uid@resourceVersion) and the
	// stable source's namespace/name.
	type source struct{ source, stable string }
	var sources map[string]source
	for i, d := range c.direct {
		list, err := d.Resource(viewGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return []string{fmt.Sprintf("a fresh list of replica %d: %v", i+1, err)}
		}
		m := map[string]string{}
		src := map[string]source{}
		for j := range list.Items {
			it := &list.Items[j]
			m[keyOf(it)] = summary(it)
			a := it.GetAnnotations()
			src[keyOf(it)] = source{a["implicit.dev/source-uid"] + "@" + a["implicit.dev/source-resource-version"], it.GetLabels()["implicit.dev/source-namespace"] + "/" + it.GetName()}
		}
		fresh = append(fresh, m)
		if i == 0 {
			sources = src
		}
	}
	var out []string
	out = append(out, compare("replica 2's fresh list", "", fresh[1], fresh[0])...)
	// Every item comes from a RoleBinding as kube-apiserver holds it now:
	// an item the replicas kept after an edit or a deletion they missed
	// shows here even when both missed it.
	rbs, err := c.kube.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, fmt.Sprintf("listing the RoleBindings: %v", err))
	}
	upstream, uids := map[string]bool{}, map[string]bool{}
	// A candidate's item names its stable source's uid with the
	// candidate's resourceVersion (pkg/views): candidateRV maps the stable
	// source's namespace/name to its candidate's resourceVersion.
	candidateRV := map[string]string{}
	for _, rb := range rbs.Items {
		upstream[string(rb.UID)+"@"+rb.ResourceVersion] = true
		uids[string(rb.UID)] = true
		if target := rb.Annotations["implicit.dev/candidate-for"]; target != "" {
			candidateRV[rb.Namespace+"/"+target] = rb.ResourceVersion
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sources)) {
		uid, rv, _ := strings.Cut(sources[k].source, "@")
		if upstream[sources[k].source] || uids[uid] && candidateRV[sources[k].stable] == rv {
			continue
		}
		out = append(out, fmt.Sprintf("the replicas serve %s from source %s (%s), which kube-apiserver does not hold", k, sources[k].source, sources[k].stable))
	}
	for _, h := range clients {
		out = append(out, compare(h.name, h.scope, h.holding(), fresh[0])...)
	}
	paged, err := pg.listAll(ctx, "")
	if err != nil {
		return append(out, fmt.Sprintf("a paginated list: %v", err))
	}
	return append(out, compare("a paginated list (limit=2)", "", paged, fresh[0])...)
}

// compare returns how what name holds differs from the fresh list in
// scope: a phantom (held, not listed), a missed item (listed, not held),
// or a stale one (held as another source or version).
func compare(name, scope string, held, fresh map[string]string) []string {
	if breakComparison {
		// IMPLICIT_ROBUSTNESS_BREAK: prove that a divergence fails the test.
		held = maps.Clone(held)
		for k := range held {
			held[k] += " (broken on purpose)"
			break
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(held)) {
		want, ok := fresh[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: phantom %s (%s), not in a fresh list", name, k, held[k]))
		case want != held[k]:
			out = append(out, fmt.Sprintf("%s: stale %s: holds %s, a fresh list has %s", name, k, held[k], want))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fresh)) {
		if _, ok := held[k]; !ok && inScope(scope, k) {
			out = append(out, fmt.Sprintf("%s: missed %s (%s), in a fresh list", name, k, fresh[k]))
		}
	}
	return out
}

// breakComparison makes compare see a difference that is not there
// (IMPLICIT_ROBUSTNESS_BREAK=1): a run with it must fail.
var breakComparison = os.Getenv("IMPLICIT_ROBUSTNESS_BREAK") == "1"

// serverRelists counts the lists a replica's reflectors made after its
// views were first served, in each of its runs (the log holds every run,
// each after a "=== " line).
func serverRelists(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n := 0
	for _, run := range strings.Split(string(data), "\n=== ") {
		if _, after, ok := strings.Cut(run, "Sources synced: serving views"); ok {
			n += strings.Count(after, "Listing and watching")
		}
	}
	return n
}

// countLines counts the lines of the file at path that contain s.
func countLines(path, s string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return strings.Count(string(data), s)
}
