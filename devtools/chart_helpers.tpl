{{/* The image repository: required, there is no default image. */}}
{{- define "nsscaler.repository" -}}
{{- required "image.repository is required: set it to your nsscaler image without tag, e.g. --set image.repository=registry.example.com/platform/nsscaler" .Values.image.repository -}}
{{- end -}}
{{/* The namespace of the chart's objects: the release's, or namespace.name (never the release's when the chart
creates it: deleting it on uninstall would delete Helm's own record of the release). */}}
{{- define "nsscaler.namespace" -}}
{{- if .Values.namespace.create -}}
{{- if not .Values.namespace.name -}}
{{- fail "namespace.create is true but namespace.name is empty: set namespace.name to the namespace the chart should create (not the release's), or leave namespace.create false and use helm install --create-namespace" -}}
{{- end -}}
{{- if eq .Values.namespace.name .Release.Namespace -}}
{{- fail (printf "namespace.create would create %s, the namespace that holds the release itself: leave namespace.create false (helm install -n %s --create-namespace makes it), or set namespace.name to another namespace" .Release.Namespace .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/* The name of the release's cluster-wide objects (and of its ServiceAccount): fullnameOverride, else
<release>-<nameOverride>, else nsscaler. */}}
{{- define "nsscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if .Values.nameOverride -}}
{{- if contains .Values.nameOverride .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- else -}}
nsscaler
{{- end -}}
{{- end -}}

{{/* The job's ServiceAccount: serviceAccount.name, else the full name. */}}
{{- define "nsscaler.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "nsscaler.fullname" .) -}}
{{- end -}}

{{/* The job Pods' PriorityClass: an existing one by name, else the chart's own, else none. */}}
{{- define "nsscaler.priorityClassName" -}}
{{- if .Values.priorityClass.existingName -}}
{{- .Values.priorityClass.existingName -}}
{{- else if .Values.priorityClass.enabled -}}
{{- include "nsscaler.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* The longest gap between two runs of `schedule`, in seconds (an upper bound: a field the rules below do not
read exactly counts as its coarsest case). */}}
{{- define "nsscaler.scheduleSeconds" -}}
{{- $s := .Values.schedule | trim -}}
{{- $macros := dict "@yearly" 31536000 "@annually" 31536000 "@monthly" 2678400 "@weekly" 604800 "@daily" 86400 "@midnight" 86400 "@hourly" 3600 -}}
{{- if hasKey $macros $s -}}
{{- get $macros $s -}}
{{- else -}}
{{- $f := splitList " " ($s | replace "\t" " ") | compact -}}
{{- $minute := index $f 0 -}}{{- $hour := index $f 1 -}}
{{- if ne (index $f 3) "*" -}}31536000
{{- else if ne (index $f 2) "*" -}}2678400
{{- else if ne (index $f 4) "*" -}}604800
{{- else if regexMatch "^\\*/[0-9]+$" $hour -}}{{ mul 3600 (int (trimPrefix "*/" $hour)) }}
{{- else if ne $hour "*" -}}86400
{{- else if eq $minute "*" -}}60
{{- else if regexMatch "^\\*/[0-9]+$" $minute -}}{{ mul 60 (int (trimPrefix "*/" $minute)) }}
{{- else -}}3600
{{- end -}}
{{- end -}}
{{- end -}}

{{/* How long no run may have reconciled a policy before NSScalerNoRecentRun: metrics.noRecentRunSeconds, else
three times the longest gap between runs of `schedule`. */}}
{{- define "nsscaler.noRecentRunSeconds" -}}
{{- .Values.metrics.noRecentRunSeconds | default (mul 3 (int (include "nsscaler.scheduleSeconds" .))) -}}
{{- end -}}
