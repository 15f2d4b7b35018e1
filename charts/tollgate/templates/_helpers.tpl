{{- define "tollgate.chart" -}}
{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Labels of every object; "tollgate.componentLabels" adds name and component. */}}
{{- define "tollgate.labels" -}}
helm.sh/chart: {{ include "tollgate.chart" . }}
app.kubernetes.io/part-of: tollgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of a component: (dict "ctx" $ "component" "proxy") */}}
{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: tollgate-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end }}

{{- define "tollgate.componentLabels" -}}
{{ include "tollgate.labels" .ctx }}
app.kubernetes.io/name: tollgate-{{ .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "tollgate.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end }}
{{- end }}

{{- define "tollgate.discoverySecret" -}}
{{- if .Values.discovery.existingSecret }}{{ .Values.discovery.existingSecret }}{{ else }}{{ .Release.Name }}-discovery{{ end }}
{{- end }}

{{- define "tollgate.tlsSecret" -}}
{{ required "discovery.tls.secretName: the kubernetes.io/tls Secret of the operator (tls.crt, tls.key, ca.crt)" .Values.discovery.tls.secretName }}
{{- end }}

{{/* Spread over nodes and zones unless the values say how: (dict "ctx" $ "component" "proxy" "values" .Values.proxy) */}}
{{- define "tollgate.spread" -}}
{{- if .values.topologySpreadConstraints }}
{{- toYaml .values.topologySpreadConstraints }}
{{- else }}
{{- range $key := list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
- maxSkew: 1
  topologyKey: {{ $key }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "tollgate.selectorLabels" (dict "ctx" $.ctx "component" $.component) | nindent 6 }}
{{- end }}
{{- end }}
{{- end }}

{{/* Scheduling and pull settings shared by both pod specs. */}}
{{- define "tollgate.podScheduling" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
topologySpreadConstraints:
  {{- include "tollgate.spread" . | nindent 2 }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- end }}
