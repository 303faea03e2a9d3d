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

{{/* Whether the backend is one every pod can share ("true" or ""): an upstream S3
service, a custom one, or a posix backend on a shared claim. */}}
{{- define "squall.sharedBackend" -}}
{{- if or (ne .Values.backend.type "posix") .Values.backend.posix.existingClaim -}}true{{- end -}}
{{- end -}}

{{/*
Whether the pods coordinate through etcd ("true" or ""): with a shared backend and an etcd
(the chart's own, or coordinator.endpoints), whatever replicaCount, so that `kubectl scale`
works from one pod up. The one-pod trial whose posix backend lives in its own data volume
runs alone. Impossible combinations stop the rendering here.
*/}}
{{- define "squall.coordinated" -}}
{{- $c := .Values.coordinator -}}
{{- if and .Values.etcd.enabled $c.endpoints -}}
{{- fail "coordinator.endpoints names an external etcd: set etcd.enabled=false with it (the chart then runs no etcd of its own)" -}}
{{- end -}}
{{- if include "squall.sharedBackend" . -}}
{{- if or .Values.etcd.enabled $c.endpoints -}}
true
{{- else if gt (int .Values.replicaCount) 1 -}}
{{- fail "replicaCount > 1 needs etcd to coordinate the pods: etcd.enabled=true (the chart runs it) or coordinator.endpoints (an external one)" -}}
{{- end -}}
{{- else if $c.endpoints -}}
{{- fail "coordinator.endpoints needs a shared backend (backend.posix.existingClaim, or backend.type=s3): a pod whose backend is in its own data volume runs alone" -}}
{{- end -}}
{{- end -}}

{{/* The etcd StatefulSet's base name, its headless Service and its pods' DNS domain. */}}
{{- define "squall.etcdName" -}}
{{- printf "%s-etcd" (include "squall.fullname" .) -}}
{{- end -}}

{{- define "squall.etcdHeadlessName" -}}
{{- printf "%s-etcd-headless" (include "squall.fullname" .) -}}
{{- end -}}

{{- define "squall.etcdDomain" -}}
{{- printf "%s.%s.svc.%s" (include "squall.etcdHeadlessName" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{/*
Labels of the etcd resources. Their name differs from the gateway's, whose selectors
(StatefulSet, Services, PodDisruptionBudget) must not match etcd pods.
*/}}
{{- define "squall.etcdSelectorLabels" -}}
app.kubernetes.io/name: {{ include "squall.name" . }}-etcd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: etcd
{{- end -}}

{{- define "squall.etcdLabels" -}}
helm.sh/chart: {{ include "squall.chart" . }}
{{ include "squall.etcdSelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.etcd.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Whether the chart runs its own etcd ("true" or ""). */}}
{{- define "squall.ownEtcd" -}}
{{- if and .Values.etcd.enabled (include "squall.coordinated" .) -}}true{{- end -}}
{{- end -}}

{{/*
Squall's coordinator setting: every member of the chart's etcd by its stable DNS name (the
client moves to the next endpoint when a call fails, which a single Service address would
hide), or coordinator.endpoints; etcds:// with coordinator.tls.enabled.
*/}}
{{- define "squall.coordinatorURL" -}}
{{- $c := .Values.coordinator -}}
{{- $endpoints := list -}}
{{- if .Values.etcd.enabled -}}
{{- $name := include "squall.etcdName" . -}}
{{- $domain := include "squall.etcdDomain" . -}}
{{- range $ordinal := until (int .Values.etcd.replicaCount) -}}
{{- $endpoints = append $endpoints (printf "%s-%d.%s:2379" $name $ordinal $domain) -}}
{{- end -}}
{{- else -}}
{{- $endpoints = $c.endpoints -}}
{{- end -}}
{{- printf "%s://%s" (ternary "etcds" "etcd" (and (not .Values.etcd.enabled) $c.tls.enabled)) (join "," $endpoints) -}}
{{- end -}}

{{/*
The options of an external etcd (TLS, user and password), checked: none of them applies to
the chart's own etcd, which serves plain HTTP without authentication.
*/}}
{{- define "squall.checkCoordinator" -}}
{{- $c := .Values.coordinator -}}
{{- if .Values.etcd.enabled -}}
{{- if or $c.tls.enabled $c.tls.existingSecret $c.user $c.password $c.existingSecret -}}
{{- fail "coordinator.tls, coordinator.user and the etcd password apply to an external etcd (etcd.enabled=false, coordinator.endpoints): the chart's own etcd serves plain HTTP without authentication" -}}
{{- end -}}
{{- end -}}
{{- if and $c.tls.existingSecret (not $c.tls.enabled) -}}
{{- fail "coordinator.tls.existingSecret needs coordinator.tls.enabled=true" -}}
{{- end -}}
{{- if and $c.tls.existingSecret (ne (empty $c.tls.secretKeys.cert) (empty $c.tls.secretKeys.key)) -}}
{{- fail "coordinator.tls.secretKeys.cert and coordinator.tls.secretKeys.key go together (a client certificate and its key), or are both empty" -}}
{{- end -}}
{{- if and $c.tls.existingSecret (not (or $c.tls.secretKeys.ca $c.tls.secretKeys.cert)) -}}
{{- fail "coordinator.tls.existingSecret is mounted for its files: name at least coordinator.tls.secretKeys.ca or .cert" -}}
{{- end -}}
{{- if and $c.user (not (or $c.password $c.existingSecret)) -}}
{{- fail "coordinator.user needs a password: coordinator.password or coordinator.existingSecret" -}}
{{- end -}}
{{- if and (or $c.password $c.existingSecret) (not $c.user) -}}
{{- fail "an etcd password (coordinator.password or coordinator.existingSecret) needs coordinator.user" -}}
{{- end -}}
{{- end -}}

{{/* Whether the chart's Secret holds the etcd password ("true" or ""). */}}
{{- define "squall.etcdPasswordInSecret" -}}
{{- $c := .Values.coordinator -}}
{{- if and (include "squall.coordinated" .) (not .Values.etcd.enabled) $c.user $c.password (not $c.existingSecret) -}}true{{- end -}}
{{- end -}}

{{- define "squall.etcdPasswordSecretName" -}}
{{- default (include "squall.fullname" .) .Values.coordinator.existingSecret -}}
{{- end -}}

{{/*
Where the preStop hook reaches the gateway from inside its pod: the loopback address of the
listen address's family (Squall binds "[::]" to IPv6 only), or a specific listen address.
The chart serves plain HTTP (config.tls_cert is refused, see squall.configToml).
*/}}
{{- define "squall.loopback" -}}
{{- $host := .Values.listenHost -}}
{{- if eq $host "0.0.0.0" -}}
127.0.0.1
{{- else if has $host (list "[::]" "::") -}}
[::1]
{{- else if contains ":" $host -}}
{{- printf "[%s]" (trimAll "[]" $host) -}}
{{- else -}}
{{- $host -}}
{{- end -}}
{{- end -}}

{{/*
The preStop hook's command with a coordinator: `squall cluster leave` (hand the unflushed
writes over, end the lease) within the grace period less the sleep and the 30 s Squall
takes to stop on SIGTERM, then the sleep; the exit status is the leave's.
*/}}
{{- define "squall.leaveScript" -}}
{{- $sleep := int .Values.preStopSleepSeconds -}}
{{- $timeout := sub (sub (int .Values.terminationGracePeriodSeconds) $sleep) 30 -}}
{{- if lt $timeout 30 -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must leave the hand-over of a leaving pod at least 30 s: at least preStopSleepSeconds + 60 (%d)" (int .Values.terminationGracePeriodSeconds) (add $sleep 60)) -}}
{{- end -}}
squall cluster leave --endpoint {{ printf "http://%s:%d" (include "squall.loopback" .) (int .Values.port) }} --timeout {{ $timeout }}; status=$?
{{- if gt $sleep 0 }}
sleep {{ $sleep }}
{{- end }}
exit $status
{{- end -}}

{{/* Squall's backend setting (KIND:ARGS), with a clear error for an impossible set-up. */}}
{{- define "squall.backend" -}}
{{- $b := .Values.backend -}}
{{- if eq $b.type "posix" -}}
{{- if $b.posix.existingClaim -}}
{{- printf "posix:%s" $b.posix.mountPath -}}
{{- else if gt (int .Values.replicaCount) 1 -}}
{{- fail "backend.posix.existingClaim is required when replicaCount > 1: the pods must share one backend (a ReadWriteMany claim), or use backend.type=s3" -}}
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
{{- if has $name (list "listen" "data_dir" "cache_dir" "backend" "cluster_secret" "access_key" "secret_key" "coordinator" "coordinator_prefix" "lease_ttl" "advertise_url" "dirty_replicas" "etcd_ca" "etcd_cert" "etcd_key" "etcd_user" "etcd_password") }}
{{- fail (printf "config.%s is set by the chart (see values.yaml); remove it from config" $name) }}
{{- end }}
{{- if has $name (list "peers" "node_id") }}
{{- fail (printf "config.%s: the chart's pods coordinate through etcd (etcd.*, coordinator.*), not a fixed member list; remove it from config" $name) }}
{{- end }}
{{- if has $name (list "tls_cert" "tls_key") }}
{{- fail (printf "config.%s: the chart serves plain HTTP (its probes, the members' advertised URLs and the preStop hook use http://); terminate TLS in front of the Service" $name) }}
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
