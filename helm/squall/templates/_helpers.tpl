{{/* Names, labels and the values computed from several settings. */}}

{{- define "squall.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Base name of every resource. Pod names add "-<ordinal>" and the headless Service adds
"-headless", so it is kept to 52 characters.
*/}}
{{- define "squall.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "squall.headlessName" -}}
{{- printf "%s-headless" (include "squall.fullname" .) -}}
{{- end -}}

{{- define "squall.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "squall.selectorLabels" -}}
app.kubernetes.io/name: {{ include "squall.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "squall.labels" -}}
helm.sh/chart: {{ include "squall.chart" . }}
{{ include "squall.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "squall.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "squall.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "squall.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the credentials and the cluster secret. */}}
{{- define "squall.authSecretName" -}}
{{- default (include "squall.fullname" .) .Values.auth.existingSecret -}}
{{- end -}}

{{/* Whether the upstream S3 key pair comes from a Secret ("true" or ""). */}}
{{- define "squall.upstreamKeys" -}}
{{- $s3 := .Values.backend.s3 -}}
{{- if and (eq .Values.backend.type "s3") (or $s3.existingSecret $s3.accessKey $s3.secretKey) -}}
true
{{- end -}}
{{- end -}}

{{/* An environment variable from a Secret: (list NAME SECRET KEY). */}}
{{- define "squall.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 }}
      key: {{ index . 2 }}
{{- end -}}

{{- define "squall.upstreamSecretName" -}}
{{- default (include "squall.fullname" .) .Values.backend.s3.existingSecret -}}
{{- end -}}

{{/*
The ordered member list of the cluster: one URL per pod of the StatefulSet, by ordinal,
through the pods' stable DNS names under the headless Service.
*/}}
{{- define "squall.peers" -}}
{{- $fullname := include "squall.fullname" . -}}
{{- $domain := printf "%s.%s.svc.%s" (include "squall.headlessName" .) .Release.Namespace .Values.clusterDomain -}}
{{- $urls := list -}}
{{- range $ordinal := until (int (include "squall.memberCount" .)) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s:%d" $fullname $ordinal $domain (int $.Values.port)) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/*
How many pods the member list names: replicaCount, or with live membership
liveMembership.members when set (at most replicaCount).
*/}}
{{- define "squall.memberCount" -}}
{{- $live := .Values.liveMembership -}}
{{- if and $live.enabled (not (kindIs "invalid" $live.members)) -}}
{{- if gt (int $live.members) (int .Values.replicaCount) -}}
{{- fail (printf "liveMembership.members (%d) cannot be above replicaCount (%d): the member file would list pods that do not exist" (int $live.members) (int .Values.replicaCount)) -}}
{{- end -}}
{{- int $live.members -}}
{{- else -}}
{{- int .Values.replicaCount -}}
{{- end -}}
{{- end -}}

{{/* Whether the pods form a cluster (several pods, or live membership). */}}
{{- define "squall.clustered" -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.liveMembership.enabled -}}true{{- end -}}
{{- end -}}

{{/* Squall's backend setting (KIND:ARGS), with a clear error for an impossible set-up. */}}
{{- define "squall.backend" -}}
{{- $b := .Values.backend -}}
{{- if eq $b.type "posix" -}}
{{- if $b.posix.existingClaim -}}
{{- printf "posix:%s" $b.posix.mountPath -}}
{{- else if gt (int .Values.replicaCount) 1 -}}
{{- fail "backend.posix.existingClaim is required when replicaCount > 1: the pods must share one backend (a ReadWriteMany claim), or use backend.type=s3" -}}
{{- else if .Values.liveMembership.enabled -}}
{{- fail "backend.posix.existingClaim is required with liveMembership.enabled: the pods it adds must share one backend (a ReadWriteMany claim), or use backend.type=s3" -}}
{{- else -}}
posix:/var/lib/squall/objects
{{- end -}}
{{- else if eq $b.type "s3" -}}
{{- if not $b.s3.endpoint -}}
{{- fail "backend.s3.endpoint is required when backend.type is s3 (e.g. https://s3.eu-west-1.amazonaws.com)" -}}
{{- end -}}
{{- $query := list -}}
{{- range $name, $value := $b.s3.options -}}
{{- if not (kindIs "invalid" $value) -}}
{{- $query = append $query (printf "%s=%s" $name (include "squall.scalar" $value | urlquery)) -}}
{{- end -}}
{{- end -}}
{{- printf "s3:%s" (trimSuffix "/" $b.s3.endpoint) -}}
{{- if $query -}}?{{ join "&" $query }}{{- end -}}
{{- else if eq $b.type "custom" -}}
{{- required "backend.spec is required when backend.type is custom (KIND:ARGS)" $b.spec -}}
{{- else -}}
{{- fail (printf "backend.type must be posix, s3 or custom, not %q" $b.type) -}}
{{- end -}}
{{- end -}}

{{/*
A scalar as text: whole numbers without a decimal point (values files give every number
as a float), everything else as it prints.
*/}}
{{- define "squall.scalar" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/* A TOML value: a quoted string, a number, a boolean, or an array of those. */}}
{{- define "squall.tomlValue" -}}
{{- if kindIs "string" . -}}
{{- toJson . | replace "\\u0026" "&" | replace "\\u003c" "<" | replace "\\u003e" ">" -}}
{{- else if kindIs "bool" . -}}
{{- ternary "true" "false" . -}}
{{- else if kindIs "slice" . -}}
{{- $items := list -}}
{{- range . -}}
{{- $items = append $items (include "squall.tomlValue" .) -}}
{{- end -}}
[{{ join ", " $items }}]
{{- else if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) -}}
{{- include "squall.scalar" . -}}
{{- end -}}
{{- end -}}

{{/* Squall's config file: the settings the chart derives, then config (null omitted). */}}
{{- define "squall.configToml" -}}
# Squall settings (squall serve --config); written by the Helm chart from its values.
listen = {{ include "squall.tomlValue" (printf "%s:%d" .Values.listenHost (int .Values.port)) }}
data_dir = "/var/lib/squall"
{{- if .Values.persistence.cache.enabled }}
cache_dir = "/var/lib/squall-cache"
{{- end }}
backend = {{ include "squall.tomlValue" (include "squall.backend" .) }}
{{- range $name, $value := .Values.config }}
{{- if has $name (list "listen" "data_dir" "cache_dir" "backend" "peers" "peers_file" "node_id" "cluster_secret" "access_key" "secret_key") }}
{{- fail (printf "config.%s is set by the chart (see values.yaml); remove it from config" $name) }}
{{- end }}
{{- range $item := ternary $value (list $value) (kindIs "slice" $value) }}
{{- if not (or (kindIs "invalid" $item) (kindIs "string" $item) (kindIs "bool" $item) (kindIs "float64" $item) (kindIs "int64" $item) (kindIs "int" $item)) }}
{{- fail (printf "config.%s: the chart writes strings, numbers, booleans and lists of them, not %s (one cache volume per pod: see persistence.cache)" $name (kindOf $item)) }}
{{- end }}
{{- end }}
{{- if not (kindIs "invalid" $value) }}
{{ $name }} = {{ include "squall.tomlValue" $value }}
{{- end }}
{{- end }}
{{- end -}}

{{/* storageClassName of a claim: null leaves the default, "-" asks for none. */}}
{{- define "squall.storageClass" -}}
{{- if not (kindIs "invalid" .storageClass) -}}
storageClassName: {{ ternary "" .storageClass (eq .storageClass "-") | quote }}
{{- end -}}
{{- end -}}
