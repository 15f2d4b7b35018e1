{{- define "tollgate.labels" -}}
app.kubernetes.io/part-of: tollgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{- define "tollgate.discoverySecret" -}}
{{- if .Values.discovery.existingSecret }}{{ .Values.discovery.existingSecret }}{{ else }}{{ .Release.Name }}-discovery{{ end }}
{{- end }}
