{{/* Names, labels and shared blocks. */}}

{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's resource name: <fullname>-<component>, cut to 63 characters. */}}
{{- define "sluice.component" -}}
{{- printf "%s-%s" (include "sluice.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sluice
{{- end -}}

{{/* Selector labels of one component; call with (dict "root" $ "component" "operator"). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.componentLabels" -}}
{{ include "sluice.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The restricted container security context (non-root, read-only root, nothing escalated, no capabilities). */}}
{{- define "sluice.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "sluice.restrictedPod" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "sluice.webhookService" -}}
{{- include "sluice.component" (dict "root" . "component" "webhook") -}}
{{- end -}}

{{- define "sluice.webhookCertSecret" -}}
{{- default (include "sluice.component" (dict "root" . "component" "webhook-tls")) .Values.certificates.secretName -}}
{{- end -}}

{{- define "sluice.certManagerCertificate" -}}
{{- include "sluice.component" (dict "root" . "component" "webhook") -}}
{{- end -}}

{{/*
The webhook's certificate when the chart generates it: made once per render and shared by every template that
needs the CA (kept in .Values under a private key), and reused from the existing Secret on upgrade so that the
CA bundle in the webhook configurations does not change with every `helm upgrade`.
*/}}
{{- define "sluice.generatedCerts" -}}
{{- if not (hasKey .Values "_sluiceGeneratedCerts") -}}
{{- $secretName := include "sluice.webhookCertSecret" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName -}}
{{- $certs := dict -}}
{{- if and $existing $existing.data (index $existing.data "ca.crt") (index $existing.data "tls.crt") (index $existing.data "tls.key") -}}
{{- $certs = dict "ca" (index $existing.data "ca.crt" | b64dec) "cert" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) -}}
{{- else -}}
{{- $svc := include "sluice.webhookService" . -}}
{{- $ns := .Release.Namespace -}}
{{- $days := int .Values.certificates.generated.validityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "sluice.fullname" .)) $days -}}
{{- $dns := list (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dns $days $ca -}}
{{- $certs = dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- $_ := set .Values "_sluiceGeneratedCerts" $certs -}}
{{- end -}}
{{- toJson (index .Values "_sluiceGeneratedCerts") -}}
{{- end -}}

{{/* caBundle (generated certificates) or nothing (cert-manager injects it); indented for a clientConfig. */}}
{{- define "sluice.caBundle" -}}
{{- if eq .Values.certificates.source "generate" -}}
{{- $certs := include "sluice.generatedCerts" . | fromJson -}}
caBundle: {{ $certs.ca | b64enc }}
{{- end -}}
{{- end -}}

{{/* cert-manager's CA injection annotation, when cert-manager makes the certificate. */}}
{{- define "sluice.injectCA" -}}
{{- if eq .Values.certificates.source "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "sluice.certManagerCertificate" .) }}
{{- end -}}
{{- end -}}

{{/* Namespaces the webhooks never see: kube-system, the release's own namespace and any configured extra. */}}
{{- define "sluice.webhookNamespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- $excluded := concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq }}
        {{- range $excluded }}
        - {{ . | quote }}
        {{- end }}
{{- end -}}
