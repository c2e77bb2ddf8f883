{{/* The name of every object of the release. */}}
{{- define "implicit-apiserver.fullname" -}}
{{- .Values.fullnameOverride | default "implicit-apiserver" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: on selectors too, so they never change between releases. */}}
{{- define "implicit-apiserver.selectorLabels" -}}
app.kubernetes.io/name: implicit-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "implicit-apiserver.labels" -}}
{{ include "implicit-apiserver.selectorLabels" . }}
app.kubernetes.io/part-of: implicit-apiserver
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ include "implicit-apiserver.tag" . | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "implicit-apiserver.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/* The Secret the pods mount: the chart's, cert-manager's, or yours. */}}
{{- define "implicit-apiserver.servingSecret" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{ .Values.certificates.existingSecret }}
{{- else -}}
{{ include "implicit-apiserver.fullname" . }}-serving-cert
{{- end -}}
{{- end -}}

{{- define "implicit-apiserver.webhookClientCAConfigMap" -}}
{{ .Values.webhooks.clientCA.configMap | default (printf "%s-webhook-client-ca" (include "implicit-apiserver.fullname" .)) }}
{{- end -}}

{{- define "implicit-apiserver.networkPolicyEnabled" -}}
{{- if or .Values.networkPolicy.enabled .Values.webhooks.anonymous }}true{{ end -}}
{{- end -}}

{{/*
The ResourceQuota some providers require for a critical priority class
outside kube-system (issue 14, item 3): rendered exactly when the class is one
of the two system classes and the namespace is not kube-system.
*/}}
{{- define "implicit-apiserver.priorityClassQuota" -}}
{{- if and (has .Values.priorityClassName (list "system-cluster-critical" "system-node-critical")) (ne .Release.Namespace "kube-system") }}true{{ end -}}
{{- end -}}

{{/*
GOMEMLIMIT from resources.limits.memory: goMemLimitPercent of it, in bytes.
Accepts the binary and decimal suffixes Kubernetes quantities use for memory.
*/}}
{{- define "implicit-apiserver.goMemLimit" -}}
{{- $limit := dig "limits" "memory" "" .Values.resources | toString -}}
{{- if and $limit (gt (int .Values.goMemLimitPercent) 0) -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $num := regexFind "^[0-9]+" $limit -}}
{{- $suffix := trimPrefix $num $limit -}}
{{- if not $num -}}{{ fail (printf "resources.limits.memory %q: expected an integer with an optional suffix (Ki, Mi, Gi, Ti, k, M, G, T)" $limit) }}{{- end -}}
{{- $mult := 1 -}}
{{- if $suffix -}}
{{- if not (hasKey $units $suffix) -}}{{ fail (printf "resources.limits.memory %q: unknown suffix %q" $limit $suffix) }}{{- end -}}
{{- $mult = index $units $suffix -}}
{{- end -}}
{{- div (mul (int64 $num) (int64 $mult) (int64 .Values.goMemLimitPercent)) 100 -}}
{{- end -}}
{{- end -}}

{{- define "implicit-apiserver.caSecret" -}}
{{ include "implicit-apiserver.fullname" . }}-ca
{{- end -}}

{{/*
The certificates in "helm" mode (README.md, "Certificates"), computed once
per render and cached in .Values so that every template sees the same ones.
All values are base64 PEM, as in a Secret's data.

- The CA, in the Secret <fullname>-ca (kept on uninstall): made once, kept on
  every upgrade (lookup), valid caValidityDays; its key signs the serving
  certificate.
- The serving certificate, in <fullname>-serving-cert, with the CA that
  issued it (issuer.crt): kept on upgrade; issued by the CA when the Secret
  is gone, so deleting it and upgrading rotates it without changing any
  caBundle; re-issued by the new CA on caRotation=promote.
- The trusted bundle (the caBundles, ca.crt of both Secrets): the CA, the
  issuer of the serving certificate if another, and during a rotation the
  next CA (prepare) or the previous one (promote). It always holds the CA of
  the serving certificate before and after the upgrade that renders it.

Every key generated here is ECDSA P-256 (README.md, "Certificates"): the
server signs one handshake per new connection of kube-apiserver's proxy, and
after a restart those come all at once. Keys already in the Secrets are kept
whatever their type (an RSA CA signs new ECDSA serving certificates).
*/}}
{{- define "implicit-apiserver.generateCerts" -}}
{{- if not (hasKey .Values "_generatedCerts") -}}
{{- $name := include "implicit-apiserver.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $rotation := .Values.certificates.caRotation | default "" -}}
{{- $caData := dig "data" dict (lookup "v1" "Secret" $ns (include "implicit-apiserver.caSecret" .) | default dict) -}}
{{- $servingData := dig "data" dict (lookup "v1" "Secret" $ns (include "implicit-apiserver.servingSecret" .) | default dict) -}}
{{- $caCrt := index $caData "tls.crt" | default "" -}}
{{- $caKey := index $caData "tls.key" | default "" -}}
{{- $nextCrt := index $caData "next.crt" | default "" -}}
{{- $nextKey := index $caData "next.key" | default "" -}}
{{- $prevCrt := index $caData "previous.crt" | default "" -}}
{{- if not (and $caCrt $caKey) -}}
{{- $ca := genCAWithKey (printf "%s-ca" $name) (int .Values.certificates.caValidityDays) (genPrivateKey "ecdsa") -}}
{{- $caCrt = $ca.Cert | b64enc -}}
{{- $caKey = $ca.Key | b64enc -}}
{{- end -}}
{{- $crt := index $servingData "tls.crt" | default "" -}}
{{- $key := index $servingData "tls.key" | default "" -}}
{{- /* A serving Secret from a chart without the CA Secret has no
     issuer.crt: its ca.crt is the CA that issued it. */ -}}
{{- $issuer := index $servingData "issuer.crt" | default (index $servingData "ca.crt") | default "" -}}
{{- if eq $rotation "prepare" -}}
{{- if not (and $nextCrt $nextKey) -}}
{{- $next := genCAWithKey (printf "%s-ca" $name) (int .Values.certificates.caValidityDays) (genPrivateKey "ecdsa") -}}
{{- $nextCrt = $next.Cert | b64enc -}}
{{- $nextKey = $next.Key | b64enc -}}
{{- end -}}
{{- $prevCrt = "" -}}
{{- else if eq $rotation "promote" -}}
{{- if and $nextCrt $nextKey -}}
{{- $prevCrt = $caCrt -}}
{{- $caCrt = $nextCrt -}}
{{- $caKey = $nextKey -}}
{{- else if not $prevCrt -}}
{{- fail "certificates.caRotation=promote: no prepared CA to promote; upgrade with certificates.caRotation=prepare first, and copy the bundle to the control plane (README.md, \"Certificates\")" -}}
{{- end -}}
{{- $nextCrt = "" -}}
{{- $nextKey = "" -}}
{{- else if eq $rotation "" -}}
{{- /* No rotation under way: a prepared, never promoted CA is dropped, and
     so is the previous one. */ -}}
{{- $nextCrt = "" -}}
{{- $nextKey = "" -}}
{{- $prevCrt = "" -}}
{{- else -}}
{{- fail (printf "certificates.caRotation %q: must be \"\", prepare or promote" $rotation) -}}
{{- end -}}
{{- if not (and $crt $key $issuer) -}}
{{- /* No serving certificate (first install, or its Secret was deleted to
     rotate it): the CA issues one. */ -}}
{{- $issuer = "" -}}
{{- end -}}
{{- if or (not $issuer) (and (eq $rotation "promote") (ne $issuer $caCrt)) -}}
{{- $signer := buildCustomCert $caCrt $caKey -}}
{{- $dns := list (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) -}}
{{- $cert := genSignedCertWithKey (printf "%s.%s.svc" $name $ns) nil $dns (int .Values.certificates.validityDays) $signer (genPrivateKey "ecdsa") -}}
{{- $crt = $cert.Cert | b64enc -}}
{{- $key = $cert.Key | b64enc -}}
{{- $issuer = $caCrt -}}
{{- end -}}
{{- $bundle := list $caCrt -}}
{{- range (list $issuer $nextCrt $prevCrt) -}}
{{- if and . (not (has . $bundle)) }}{{ $bundle = append $bundle . }}{{ end -}}
{{- end -}}
{{- $pem := "" -}}
{{- range $bundle }}{{ $pem = printf "%s%s" $pem (. | b64dec) }}{{ end -}}
{{- $certs := dict "caCrt" $caCrt "caKey" $caKey "nextCrt" $nextCrt "nextKey" $nextKey "prevCrt" $prevCrt
      "crt" $crt "key" $key "issuer" $issuer "ca" ($pem | b64enc) -}}
{{- $_ := set .Values "_generatedCerts" $certs -}}
{{- end -}}
{{- end -}}

{{/* caBundle (base64 PEM) in "helm" and "existingSecret" modes. */}}
{{- define "implicit-apiserver.caBundle" -}}
{{- include "implicit-apiserver.validate" . -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- if .Values.certificates.caBundle -}}
{{- .Values.certificates.caBundle | b64enc -}}
{{- else -}}
{{- $data := dig "data" dict (lookup "v1" "Secret" .Release.Namespace .Values.certificates.existingSecret | default dict) -}}
{{- $ca := index $data "ca.crt" | default "" -}}
{{- if not $ca -}}
{{- fail (printf "certificates.mode=existingSecret: set certificates.caBundle (PEM), or create the Secret %q with ca.crt before installing (helm template can't read it)" .Values.certificates.existingSecret) -}}
{{- end -}}
{{- $ca -}}
{{- end -}}
{{- else -}}
{{- include "implicit-apiserver.generateCerts" . -}}
{{- .Values._generatedCerts.ca -}}
{{- end -}}
{{- end -}}

{{/* cert-manager's CA injection annotation, in "cert-manager" mode. */}}
{{- define "implicit-apiserver.injectCA" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "implicit-apiserver.servingSecret" . }}
{{- end -}}
{{- end -}}

{{- define "implicit-apiserver.validate" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository is required: the implicit-apiserver image is published nowhere. Build it with `make image` (_output/image/implicit-apiserver.tar), push it to your registry (skopeo copy oci-archive:... docker://REGISTRY/implicit-apiserver:TAG) and set image.repository (and image.tag); docs/install.md, \"The image\"" -}}
{{- end -}}
{{- if not (has .Values.certificates.mode (list "helm" "cert-manager" "existingSecret")) -}}
{{- fail (printf "certificates.mode %q: must be helm, cert-manager or existingSecret" .Values.certificates.mode) -}}
{{- end -}}
{{- if and (eq .Values.certificates.mode "existingSecret") (not .Values.certificates.existingSecret) -}}
{{- fail "certificates.mode=existingSecret needs certificates.existingSecret: the name of your Secret with tls.crt, tls.key and ca.crt" -}}
{{- end -}}
{{- if and .Values.certificates.caRotation (ne .Values.certificates.mode "helm") -}}
{{- fail "certificates.caRotation rotates the chart-generated CA: only with certificates.mode=helm" -}}
{{- end -}}
{{- if and .Values.hub.kubeconfigSecret (not .Values.hub.clusterName) -}}
{{- fail "hub.clusterName is required with hub.kubeconfigSecret" -}}
{{- end -}}
{{- with .Values.webhooks.clientCA.pem -}}
{{- if not (regexMatch "(?s)^\\s*-----BEGIN CERTIFICATE-----.+-----END CERTIFICATE-----\\s*$" .) -}}
{{- fail "webhooks.clientCA.pem: not a PEM certificate bundle (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----): the CA of kube-apiserver's webhook client certificate" -}}
{{- end -}}
{{- end -}}
{{- if .Values.admissionPolicyExample.enabled -}}
{{- $configmaps := false -}}
{{- range .Values.kinds }}{{ if and (eq (.group | default "") "") (eq .resource "configmaps") }}{{ $configmaps = true }}{{ end }}{{ end -}}
{{- if not $configmaps -}}
{{- fail "admissionPolicyExample.enabled needs kinds to serve configmaps (its parameter is the ConfigMap view replica-limit): add {group: \"\", version: v1, resource: configmaps} to kinds, with the kinds served by default you keep" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.webhooks.anonymous (not .Values.networkPolicy.from) -}}
{{- fail "webhooks.anonymous needs networkPolicy.from: the control plane's addresses, so that nobody else reaches the anonymous admission endpoints" -}}
{{- end -}}
{{- end -}}

{{/*
The webhooks whose rules the server sets to the served kinds (pkg/admission,
setRules: the webhooks on source kinds). test/chart checks the names exist.
*/}}
{{- define "implicit-apiserver.syncedWebhooks" -}}
["locks.implicit.dev", "shadows.implicit.dev", "fanout.implicit.dev", "materialized.implicit.dev", "candidates.implicit.dev"]
{{- end -}}
