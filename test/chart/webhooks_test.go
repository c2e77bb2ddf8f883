package chart_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
)

// TestWebhooks: the chart's webhook configurations are artifacts/base's
// (which test/integration checks against pkg/admission), calling the
// release's Service.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"validatingwebhookconfiguration.yaml", "mutatingwebhookconfiguration.yaml"} {
		chartFile, err := os.ReadFile(filepath.Join(chartDir, "files", file))
		if err != nil {
			t.Fatal(err)
		}
		baseFile, err := os.ReadFile(filepath.Join(repoRoot, "artifacts", "base", file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(chartFile, baseFile) {
			t.Errorf("charts/implicit-apiserver/files/%s differs from artifacts/base/%s: cp artifacts/base/%s charts/implicit-apiserver/files/", file, file, file)
		}
	}
	objs := mustTemplate(t, "fullnameOverride=implicit")
	var validating, baseValidating admissionregistrationv1.ValidatingWebhookConfiguration
	convert(t, objs.get("ValidatingWebhookConfiguration", "implicit"), &validating)
	readYAML(t, "artifacts/base/validatingwebhookconfiguration.yaml", &baseValidating)
	var mutating, baseMutating admissionregistrationv1.MutatingWebhookConfiguration
	convert(t, objs.get("MutatingWebhookConfiguration", "implicit"), &mutating)
	readYAML(t, "artifacts/base/mutatingwebhookconfiguration.yaml", &baseMutating)
	if len(validating.Webhooks) != len(baseValidating.Webhooks) || len(mutating.Webhooks) != len(baseMutating.Webhooks) {
		t.Fatalf("chart has %d+%d webhooks, artifacts/base %d+%d", len(validating.Webhooks), len(mutating.Webhooks), len(baseValidating.Webhooks), len(baseMutating.Webhooks))
	}
	check := func(name string, got, want admissionregistrationv1.WebhookClientConfig) {
		if got.Service == nil || got.Service.Namespace != namespace || got.Service.Name != "implicit" {
			t.Errorf("webhook %s calls %+v, want the Service %s/implicit", name, got.Service, namespace)
			return
		}
		if *got.Service.Path != *want.Service.Path || *got.Service.Port != *want.Service.Port {
			t.Errorf("webhook %s path %s port %d, want %s %d", name, *got.Service.Path, *got.Service.Port, *want.Service.Path, *want.Service.Port)
		}
	}
	for i := range validating.Webhooks {
		g, w := validating.Webhooks[i], baseValidating.Webhooks[i]
		check(g.Name, g.ClientConfig, w.ClientConfig)
		g.ClientConfig, w.ClientConfig = admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("webhook %s differs from artifacts/base:\nchart: %+v\nbase:  %+v", g.Name, g, w)
		}
	}
	for i := range mutating.Webhooks {
		g, w := mutating.Webhooks[i], baseMutating.Webhooks[i]
		check(g.Name, g.ClientConfig, w.ClientConfig)
		g.ClientConfig, w.ClientConfig = admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("webhook %s differs from artifacts/base:\nchart: %+v\nbase:  %+v", g.Name, g, w)
		}
	}
	if !slices.Contains(objs.args(t), "--webhook-configuration=implicit") {
		t.Errorf("args %q: the server doesn't keep the release's webhook configuration", objs.args(t))
	}
}

// TestSyncedWebhooks: the webhooks whose live rules the chart keeps on
// upgrade are the ones the server sets rules on (pkg/admission).
func TestSyncedWebhooks(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(chartDir, "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), `{{- define "implicit-apiserver.syncedWebhooks" -}}`)
	if !ok {
		t.Fatal(`no "implicit-apiserver.syncedWebhooks" in _helpers.tpl`)
	}
	list, _, _ := strings.Cut(rest, "{{- end -}}")
	var names []string
	if err := json.Unmarshal([]byte(list), &names); err != nil {
		t.Fatalf("implicit-apiserver.syncedWebhooks %q: %v", list, err)
	}
	want := []string{webhookconfig.WebhookLocks, webhookconfig.WebhookShadows, webhookconfig.WebhookFanout, webhookconfig.WebhookMaterialized, webhookconfig.WebhookCandidates}
	if !slices.Equal(names, want) {
		t.Errorf("chart keeps the live rules of %q, the server sets those of %q", names, want)
	}
}
