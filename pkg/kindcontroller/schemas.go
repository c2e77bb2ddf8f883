package kindcontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

// FetchHostSchemas reads the OpenAPI v3 documents of the group versions gvs
// from the host cluster.
func FetchHostSchemas(ctx context.Context, client discovery.DiscoveryInterface, gvs []schema.GroupVersion) (servedgroup.HostSchemas, error) {
	var uncached *schemaCache
	return uncached.fetch(ctx, client, gvs)
}

// schemaCache keeps the last document read of each group version, keyed by
// its server-relative URL, which carries a hash of the document: a poll
// that finds the same URL reads nothing more than the host's index.
type schemaCache struct {
	mu   sync.Mutex
	docs map[string]cachedDoc
}

type cachedDoc struct {
	url     string
	schemas map[string]*spec.Schema
}

func (c *schemaCache) fetch(ctx context.Context, client discovery.DiscoveryInterface, gvs []schema.GroupVersion) (servedgroup.HostSchemas, error) {
	paths, err := client.OpenAPIV3().Paths()
	if err != nil {
		return nil, fmt.Errorf("listing the host's OpenAPI v3 documents: %w", err)
	}
	out := servedgroup.HostSchemas{}
	for _, gv := range gvs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		path := "apis/" + gv.String()
		if gv.Group == "" {
			path = "api/" + gv.Version
		}
		doc, ok := paths[path]
		if !ok {
			return nil, fmt.Errorf("the host publishes no OpenAPI v3 document for %s", gv)
		}
		schemas, err := c.document(path, doc)
		if err != nil {
			return nil, fmt.Errorf("reading the host's OpenAPI v3 document for %s: %w", gv, err)
		}
		for name, s := range schemas {
			out[name] = s
		}
	}
	return out, nil
}

// document returns the component schemas of one document, from the cache
// while its URL is unchanged; a nil cache reads every time. They are shared:
// read only.
func (c *schemaCache) document(path string, doc openapi.GroupVersion) (map[string]*spec.Schema, error) {
	var url string
	if c != nil {
		url = doc.ServerRelativeURL()
		c.mu.Lock()
		cached, ok := c.docs[path]
		c.mu.Unlock()
		if ok && url != "" && cached.url == url {
			return cached.schemas, nil
		}
	}
	raw, err := doc.Schema("application/json")
	if err != nil {
		return nil, err
	}
	var parsed spec3.OpenAPI
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	schemas := map[string]*spec.Schema{}
	if parsed.Components != nil {
		schemas = parsed.Components.Schemas
	}
	if c == nil {
		return schemas, nil
	}
	c.mu.Lock()
	if c.docs == nil {
		c.docs = map[string]cachedDoc{}
	}
	c.docs[path] = cachedDoc{url: url, schemas: schemas}
	c.mu.Unlock()
	return schemas, nil
}
