{{/* Names: sluice-controller and sluice-proxy for a release named sluice,
RELEASE-sluice-controller otherwise, so two releases never collide. */}}
{{- define "sluice.fullname" -}}
{{- if eq .Release.Name .Chart.Name -}}{{ .Chart.Name }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- define "sluice.controller.name" -}}{{ include "sluice.fullname" . }}-controller{{- end -}}
{{- define "sluice.proxy.name" -}}{{ include "sluice.fullname" . }}-proxy{{- end -}}

{{- define "sluice.labels" -}}
app.kubernetes.io/part-of: sluice
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels: stable across upgrades (a Deployment's selector is
immutable). */}}
{{- define "sluice.controller.selector" -}}
app.kubernetes.io/name: {{ include "sluice.controller.name" . }}
{{- end -}}
{{- define "sluice.proxy.selector" -}}
app.kubernetes.io/name: {{ include "sluice.proxy.name" . }}
{{- end -}}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The proxy's terminationGracePeriodSeconds: the drain wait, then the
shutdown timeout, then a margin; the only place these are added up. */}}
{{- define "sluice.proxy.grace" -}}
{{ add .Values.proxy.drainMaxWaitSeconds .Values.proxy.shutdownTimeoutSeconds .Values.proxy.terminationMarginSeconds }}
{{- end -}}

{{/* A listen address: $(POD_IP):port with listenOnPodIP, :port otherwise. */}}
{{- define "sluice.listen" -}}
{{- if .root.Values.listenOnPodIP -}}$(POD_IP):{{ .port }}{{- else -}}:{{ .port }}{{- end -}}
{{- end -}}

{{/* The IngressClass the proxy serves. */}}
{{- define "sluice.proxy.ingressClass" -}}
{{- if .Values.proxy.ingressClass -}}{{ .Values.proxy.ingressClass }}{{- else if .Values.ingressClasses -}}{{ (first .Values.ingressClasses).name }}{{- else -}}sluice{{- end -}}
{{- end -}}

{{/* Allow-lists: the value, else what the chart's bindings name; with
bindings of the other provider only "none", with no bindings at all "*". */}}
{{- define "sluice.allowedHAProxy" -}}
{{- $l := .Values.controller.allowedHAProxyRuntimeAPIs -}}
{{- if not $l -}}
{{- range .Values.bindings -}}{{- if and .provider .provider.haproxy -}}{{- $l = append $l .provider.haproxy.runtimeAPI -}}{{- end -}}{{- end -}}
{{- end -}}
{{- if not $l -}}{{- $l = list (ternary "none" "*" (gt (len .Values.bindings) 0)) -}}{{- end -}}
{{ $l | uniq | join "," }}
{{- end -}}
{{- define "sluice.allowedAWS" -}}
{{- $l := .Values.controller.allowedAWSTargetGroups -}}
{{- if not $l -}}
{{- range .Values.bindings -}}{{- if and .provider .provider.aws -}}
{{- if .provider.aws.targetGroupARNs -}}{{- $l = concat $l .provider.aws.targetGroupARNs -}}{{- else -}}{{- $l = append $l (printf "tag:sluice.dev/frontend=%s/%s" $.Release.Namespace .name) -}}{{- end -}}
{{- end -}}{{- end -}}
{{- end -}}
{{- range $l -}}
{{- if and (hasPrefix "tag:" .) (not (regexMatch "^tag:sluice\\.dev/frontend=[a-z0-9]([-a-z0-9]*[a-z0-9])?/[^/]+$" .)) -}}
{{- fail (printf "controller.allowedAWSTargetGroups: %q: a tag entry names the binding as tag:sluice.dev/frontend=NAMESPACE/NAME (NAME or *); a bare NAME once allowed that name in every namespace (CHANGELOG, issue 24)" .) -}}
{{- end -}}
{{- end -}}
{{- if not $l -}}{{- $l = list (ternary "none" "*" (gt (len .Values.bindings) 0)) -}}{{- end -}}
{{ $l | uniq | join "," }}
{{- end -}}

{{/* The binding namespaces, comma-separated: controller.bindingNamespaces,
else the release namespace. "*" means every namespace. */}}
{{- define "sluice.bindingNamespaces" -}}
{{ .Values.controller.bindingNamespaces | default (list .Release.Namespace) | uniq | join "," }}
{{- end -}}

{{/* The IngressDaemonSet namespaces, comma-separated:
controller.ingressDaemonSets.namespaces, else the release namespace. "*"
means every namespace. */}}
{{- define "sluice.ingressDaemonSetNamespaces" -}}
{{ .Values.controller.ingressDaemonSets.namespaces | default (list .Release.Namespace) | uniq | join "," }}
{{- end -}}

{{/* The names of the webhook configurations the chart creates and the
controller patches (its caBundle, by name). */}}
{{- define "sluice.webhook.evictionName" -}}{{ include "sluice.fullname" . }}-eviction-floor{{- end -}}
{{- define "sluice.webhook.steerName" -}}{{ include "sluice.fullname" . }}-zone-steer{{- end -}}

{{/* A listen address on the pod's own IP, for admin, metrics, health and
webhook ports: never every interface. */}}
{{- define "sluice.podListen" -}}$(POD_IP):{{ . }}{{- end -}}

{{/* The restricted Pod Security profile, pod part. */}}
{{- define "sluice.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* ServiceAccount names: the value's name, else the chart's name when it
creates the account, else "default". The chart's RBAC binds to these. */}}
{{- define "sluice.controller.serviceAccountName" -}}
{{- $sa := .Values.controller.serviceAccount -}}
{{- if $sa.name -}}{{ $sa.name }}{{- else if $sa.create -}}{{ include "sluice.controller.name" . }}{{- else -}}default{{- end -}}
{{- end -}}
{{/* Argument: dict root, proxy (a fleet's proxy values). */}}
{{- define "sluice.proxy.serviceAccountName" -}}
{{- $sa := .proxy.serviceAccount | default dict -}}
{{- if $sa.name -}}{{ $sa.name }}{{- else if $sa.create -}}{{ include "sluice.proxy.name" .root }}{{- else -}}default{{- end -}}
{{- end -}}
{{- define "sluice.nodeHealth.serviceAccountName" -}}
{{- $sa := .Values.nodeHealth.serviceAccount -}}
{{- if $sa.name -}}{{ $sa.name }}{{- else if $sa.create -}}{{ include "sluice.fullname" . }}-node-health{{- else -}}default{{- end -}}
{{- end -}}

{{/* The controller ServiceAccount's annotations:
controller.serviceAccount.annotations over the deprecated
controller.serviceAccountAnnotations. */}}
{{- define "sluice.controller.serviceAccountAnnotations" -}}
{{- $a := merge (deepCopy (.Values.controller.serviceAccount.annotations | default dict)) (.Values.controller.serviceAccountAnnotations | default dict) -}}
{{- if $a }}{{ toYaml $a }}{{ end -}}
{{- end -}}

{{/* sluice.proxy.serviceAccounts: a YAML list of {name, create,
annotations}, one per ServiceAccount the proxy fleets run under (most
often one, shared). Two fleets naming one account must agree on it. */}}
{{- define "sluice.proxy.serviceAccounts" -}}
{{- $root := . -}}
{{- $byName := dict -}}
{{- range $fleet := include "sluice.fleets" . | fromYamlArray -}}
{{- $p := include "sluice.fleet.values" (dict "root" $root "fleet" $fleet) | fromYaml -}}
{{- $name := include "sluice.proxy.serviceAccountName" (dict "root" $root "proxy" $p) -}}
{{- $sa := dict "name" $name "create" (and $p.serviceAccount $p.serviceAccount.create (ne $name "default")) "annotations" (($p.serviceAccount | default dict).annotations | default dict) -}}
{{- with get $byName $name -}}
{{- if ne (toYaml .) (toYaml $sa) -}}
{{- fail (printf "proxy fleets share the ServiceAccount %s with different serviceAccount.create or annotations: give each its own serviceAccount.name" $name) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $byName $name $sa -}}
{{- end -}}
{{- $out := list -}}
{{- range $k := keys $byName | sortAlpha -}}{{- $out = append $out (get $byName $k) -}}{{- end -}}
{{ toYaml $out }}
{{- end -}}

{{/* IngressDaemonSets are on with controller.ingressDaemonSets.enabled or
when a proxy fleet is one: "true" or "". */}}
{{- define "sluice.ids.enabled" -}}
{{- if or .Values.controller.ingressDaemonSets.enabled (include "sluice.fleets.ids" .) -}}true{{- end -}}
{{- end -}}
{{/* sluice.fleets.ids: "true" when a proxy fleet is an IngressDaemonSet. */}}
{{- define "sluice.fleets.ids" -}}
{{- $root := . -}}
{{- $on := false -}}
{{- range $fleet := include "sluice.fleets" . | fromYamlArray -}}
{{- $p := include "sluice.fleet.values" (dict "root" $root "fleet" $fleet) | fromYaml -}}
{{- if eq $p.kind "IngressDaemonSet" -}}{{- $on = true -}}{{- end -}}
{{- end -}}
{{- if $on -}}true{{- end -}}
{{- end -}}

{{/* sluice.pod.common: the pod spec fields every component takes from its
values (.v, with the root .root) as YAML, "" if none: image pull secrets,
priority class, host network, security context. */}}
{{- define "sluice.pod.common" -}}
{{- $d := dict -}}
{{- with .root.Values.imagePullSecrets }}{{ $_ := set $d "imagePullSecrets" . }}{{ end -}}
{{- with .v.priorityClassName }}{{ $_ := set $d "priorityClassName" . }}{{ end -}}
{{- if .hostNetwork }}{{ $_ := set $d "hostNetwork" true }}{{ $_ := set $d "dnsPolicy" "ClusterFirstWithHostNet" }}{{ end -}}
{{- with .v.podSecurityContext }}{{ $_ := set $d "securityContext" . }}{{ end -}}
{{- if $d }}{{ toYaml $d }}{{ end -}}
{{- end -}}

{{/* sluice.pod.labels: a component's pod labels, its podLabels under the
chart's own (.labels, YAML), which win. */}}
{{- define "sluice.pod.labels" -}}
{{- toYaml (merge (fromYaml .labels) (deepCopy (.v.podLabels | default dict))) }}
{{- end -}}

{{/* sluice.pod.placement: nodeSelector, tolerations, affinity of the
values given, as YAML ("" if none). */}}
{{- define "sluice.pod.placement" -}}
{{- $d := dict -}}
{{- range $k := list "nodeSelector" "tolerations" "affinity" }}{{ with get $ $k }}{{ $_ := set $d $k . }}{{ end }}{{ end -}}
{{- if $d }}{{ toYaml $d }}{{ end -}}
{{- end -}}
