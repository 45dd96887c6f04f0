{{/*
Labels Helm adds to the metadata of every object it installs, besides the ones the
kustomize manifests carry (app.kubernetes.io/name, app.kubernetes.io/component). They are
never used in selectors, so an upgrade of the chart does not orphan Pods.
*/}}
{{- define "juneau.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The juneau image of every container. */}}
{{- define "juneau.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
Scheduling of one component: nodeSelector, tolerations and priorityClassName from its
values; each is left out when empty. Called with the component's values.
*/}}
{{- define "juneau.scheduling" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
