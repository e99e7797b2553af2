{{/* Proxy fleets. Without any bindings[].proxy block the chart runs one
proxy fleet (sluice-proxy) serving every class of ingressClasses (and
proxy.ingressClass), selected by every binding: the layout before fleets.
A binding with a proxy block gets its own fleet, RELEASE-proxy-BINDING,
serving only the classes whose binding it is (--ingress-class), selected
only by that binding, so its readiness gate and drain follow that load
balancer alone; its values are proxy.* overridden by the block. The
default fleet then serves the classes left, and is not rendered when none
is left. */}}

{{/* sluice.fleets: a YAML list of {name, classes, binding}: "" is the
default fleet. */}}
{{- define "sluice.fleets" -}}
{{- $fleetOf := dict -}}
{{- $fleets := list -}}
{{- range .Values.bindings -}}
{{- if hasKey . "proxy" -}}
{{- if .selector -}}{{- fail (printf "bindings %s: selector and proxy are exclusive (the binding of a proxy fleet selects that fleet's pods)" .name) -}}{{- end -}}
{{- if and .proxy (hasKey .proxy "ingressClass") -}}{{- fail (printf "bindings %s: proxy.ingressClass is not a fleet value (a fleet serves the ingressClasses whose binding it is)" .name) -}}{{- end -}}
{{- $_ := set $fleetOf .name (list) -}}
{{- end -}}
{{- end -}}
{{- $rest := list -}}
{{- with $.Values.proxy.ingressClass -}}{{- $rest = append $rest . -}}{{- end -}}
{{- range .Values.ingressClasses -}}
{{- if and .binding (hasKey $fleetOf .binding) -}}
{{- $_ := set $fleetOf .binding (append (get $fleetOf .binding) .name) -}}
{{- else -}}
{{- $rest = append $rest .name -}}
{{- end -}}
{{- end -}}
{{- if or (not $fleetOf) $rest -}}
{{- $fleets = append $fleets (dict "name" "" "classes" (default (list "sluice") ($rest | uniq))) -}}
{{- end -}}
{{- range .Values.bindings -}}
{{- if hasKey $fleetOf .name -}}
{{- if not (get $fleetOf .name) -}}{{- fail (printf "bindings %s: a proxy fleet serves the ingressClasses whose binding it is, and none names %s" .name .name) -}}{{- end -}}
{{- $fleets = append $fleets (dict "name" .name "classes" (get $fleetOf .name) "binding" .name) -}}
{{- end -}}
{{- end -}}
{{ toYaml $fleets }}
{{- end -}}

{{/* sluice.fleet.name: the workload and app.kubernetes.io/name of fleet
.fleet ("" the default) of release .root. */}}
{{- define "sluice.fleet.name" -}}
{{- if .fleet -}}{{ printf "%s-%s" (include "sluice.proxy.name" .root) .fleet | trunc 63 | trimSuffix "-" }}{{- else -}}{{ include "sluice.proxy.name" .root }}{{- end -}}
{{- end -}}
{{- define "sluice.fleet.selector" -}}
app.kubernetes.io/name: {{ include "sluice.fleet.name" . }}
{{- end -}}

{{/* sluice.fleet.values: the proxy values of a fleet as YAML: proxy.*
overridden by its binding's proxy block. Argument: dict root, fleet (an
item of sluice.fleets). */}}
{{- define "sluice.fleet.values" -}}
{{- $v := deepCopy .root.Values.proxy -}}
{{- range .root.Values.bindings -}}
{{- if and (eq .name $.fleet.name) .proxy -}}
{{- /* Set key by key (mergeOverwrite would skip false and 0), one level
deep for maps such as topologySpread; lists and resources are replaced. */ -}}
{{- range $k, $x := .proxy -}}
{{- $old := get $v $k -}}
{{- if and (kindIs "map" $x) (kindIs "map" $old) (ne $k "resources") -}}
{{- range $k2, $x2 := $x -}}{{- $_ := set $old $k2 $x2 -}}{{- end -}}
{{- else -}}
{{- $_ := set $v $k $x -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{ toYaml $v }}
{{- end -}}

{{/* sluice.gatewayFleet: the name of the fleet serving
gatewayAPI.gatewayClass: the fleet of gatewayAPI.binding when it has one,
else the default fleet (""). */}}
{{- define "sluice.gatewayFleet" -}}
{{- $b := .Values.gatewayAPI.binding -}}
{{- range include "sluice.fleets" . | fromYamlArray -}}
{{- if and $b (eq .name $b) -}}{{ $b }}{{- end -}}
{{- end -}}
{{- end -}}

{{- /* sluice.gatewayAddresses: the spec.gatewayAddresses of the binding
gatewayAPI.binding, comma-separated ("" for none). */ -}}
{{- define "sluice.gatewayAddresses" -}}
{{- $name := .Values.gatewayAPI.binding -}}
{{- range .Values.bindings -}}
{{- if and $name (eq .name $name) -}}{{ join "," (.gatewayAddresses | default list) }}{{- end -}}
{{- end -}}
{{- end -}}
