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

{{- define "implicit-apiserver.servingSecret" -}}
{{ include "implicit-apiserver.fullname" . }}-serving-cert
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

{{/*
The serving certificate in "helm" mode, generated once per release and kept:
an existing Secret (from an earlier install or upgrade) is reused, so the
caBundles of the APIService and the webhooks never change on upgrade. The
result is cached in .Values so that every template sees the same one.
*/}}
{{- define "implicit-apiserver.generateCerts" -}}
{{- if not (hasKey .Values "_generatedCerts") -}}
{{- $name := include "implicit-apiserver.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $existing := lookup "v1" "Secret" $ns (include "implicit-apiserver.servingSecret" .) | default dict -}}
{{- $data := dig "data" dict $existing -}}
{{- $certs := dict -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $_ := set $certs "ca" (index $data "ca.crt") -}}
{{- $_ := set $certs "crt" (index $data "tls.crt") -}}
{{- $_ := set $certs "key" (index $data "tls.key") -}}
{{- else -}}
{{- $days := int .Values.certificates.validityDays -}}
{{- $ca := genCA (printf "%s-ca" $name) $days -}}
{{- $dns := list (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $name $ns) nil $dns $days $ca -}}
{{- $_ := set $certs "ca" ($ca.Cert | b64enc) -}}
{{- $_ := set $certs "crt" ($cert.Cert | b64enc) -}}
{{- $_ := set $certs "key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- $_ := set .Values "_generatedCerts" $certs -}}
{{- end -}}
{{- end -}}

{{/* caBundle (base64 PEM) in "helm" mode. */}}
{{- define "implicit-apiserver.caBundle" -}}
{{- include "implicit-apiserver.generateCerts" . -}}
{{- .Values._generatedCerts.ca -}}
{{- end -}}

{{/* cert-manager's CA injection annotation, in "cert-manager" mode. */}}
{{- define "implicit-apiserver.injectCA" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "implicit-apiserver.servingSecret" . }}
{{- end -}}
{{- end -}}

{{- define "implicit-apiserver.validate" -}}
{{- if not (has .Values.certificates.mode (list "helm" "cert-manager")) -}}
{{- fail (printf "certificates.mode %q: must be helm or cert-manager" .Values.certificates.mode) -}}
{{- end -}}
{{- if and .Values.hub.kubeconfigSecret (not .Values.hub.clusterName) -}}
{{- fail "hub.clusterName is required with hub.kubeconfigSecret" -}}
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
