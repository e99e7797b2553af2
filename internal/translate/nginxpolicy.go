package translate

import (
	"strconv"
	"strings"
)

// The ingress-nginx names of the request policies (issue 27 part B), for
// the --ingress-nginx-compat framework and `sluice migrate` to merge with
// the other features' tables. Compatibility works by conversion: an nginx
// annotation's value is turned into the sluice.dev annotation it maps to,
// with ingress-nginx's defaults filled in, and then read by that
// annotation's own parser (so its checks and problems apply unchanged).

// NginxPrefix is the prefix of ingress-nginx's annotations.
const NginxPrefix = "nginx.ingress.kubernetes.io/"

// NginxSupport says how sluice serves an ingress-nginx annotation.
type NginxSupport string

const (
	// NginxPolicySame: the same semantics and defaults.
	NginxPolicySame NginxSupport = "supported"
	// NginxPolicyDifferent: supported, with the difference in Note.
	NginxPolicyDifferent NginxSupport = "supported-with-difference"
	// NginxPolicyUnsupported: not served; the Ingress is told.
	NginxPolicyUnsupported NginxSupport = "unsupported"
)

// NginxMapping maps one ingress-nginx annotation (name without
// NginxPrefix) to the sluice.dev annotation that serves it.
type NginxMapping struct {
	Nginx   string
	Sluice  string // "" when unsupported
	Support NginxSupport
	// Default is ingress-nginx's default, applied in compatibility mode
	// when a related annotation is set ("" for none).
	Default string
	Note    string
}

// NginxPolicyTable lists the ingress-nginx annotations of the request
// policies. Sorted by Nginx.
var NginxPolicyTable = []NginxMapping{
	{Nginx: "auth-realm", Sluice: AnnotationAuthRealm, Support: NginxPolicySame, Default: DefaultAuthRealm},
	{Nginx: "auth-response-headers", Sluice: AnnotationAuthResponseHeaders, Support: NginxPolicyDifferent,
		Note: "a client's own value of a listed header is removed even when the auth service does not send it"},
	{Nginx: "auth-secret", Sluice: AnnotationAuthSecret, Support: NginxPolicyDifferent,
		Note: "the Secret must be in the Ingress's namespace (namespace/name of another is refused, the route answers 503) and labelled sluice.dev/auth-secret=true; {SHA}, $apr1$ (htpasswd's default) and bcrypt ($2a$, $2b$, $2y$) hashes up to cost 12, no crypt"},
	{Nginx: "auth-secret-type", Support: NginxPolicyDifferent, Default: "auth-file",
		Note: `only "auth-file" (htpasswd lines in key auth); "auth-map" is refused and the route answers 503`},
	{Nginx: "auth-signin", Sluice: AnnotationAuthSignin, Support: NginxPolicyDifferent,
		Note: "the original URL goes in the rd parameter as in ingress-nginx; variables ($host, $escaped_request_uri) are not expanded and the URL is refused"},
	{Nginx: "auth-type", Sluice: AnnotationAuthType, Support: NginxPolicyDifferent, Note: `only "basic"; "digest" makes the route answer 503`},
	{Nginx: "auth-url", Sluice: AnnotationAuthURL, Support: NginxPolicyDifferent, Default: "",
		Note: "only a Service of the Ingress's namespace (http://SERVICE.NAMESPACE.svc[:PORT]/path) unless the proxy runs with --forward-auth-any-url; failures of the auth service answer 500, as in ingress-nginx; timeout sluice.dev/auth-timeout (5s)"},
	{Nginx: "cors-allow-credentials", Sluice: AnnotationCORSAllowCredentials, Support: NginxPolicyDifferent, Default: "true",
		Note: `with origin "*" no Access-Control-Allow-Credentials is sent (the CORS protocol forbids the pair; browsers refuse it from ingress-nginx too)`},
	{Nginx: "cors-allow-headers", Sluice: AnnotationCORSAllowHeaders, Support: NginxPolicySame, Default: DefaultCORSHeaders},
	{Nginx: "cors-allow-methods", Sluice: AnnotationCORSAllowMethods, Support: NginxPolicySame, Default: DefaultCORSMethods},
	{Nginx: "cors-allow-origin", Sluice: AnnotationCORSAllowOrigin, Support: NginxPolicySame, Default: "*"},
	{Nginx: "cors-expose-headers", Sluice: AnnotationCORSExposeHeaders, Support: NginxPolicySame},
	{Nginx: "cors-max-age", Sluice: AnnotationCORSMaxAge, Support: NginxPolicySame, Default: "1728000"},
	{Nginx: "custom-http-errors", Sluice: AnnotationCustomHTTPErrors, Support: NginxPolicyDifferent,
		Note: "needs default-backend (there is no global error backend); the upstream's answers are replaced, the proxy's own (502, 503, 504) are not"},
	{Nginx: "default-backend", Sluice: AnnotationErrorBackend, Support: NginxPolicyDifferent,
		Note: "a Service of the Ingress's namespace, port 80, used for custom-http-errors only: a Service without endpoints answers 503 instead of falling back to it"},
	{Nginx: "denylist-source-range", Sluice: AnnotationDenySourceRange, Support: NginxPolicySame},
	{Nginx: "enable-cors", Sluice: AnnotationCORSEnable, Support: NginxPolicySame, Default: "false"},
	{Nginx: "limit-burst-multiplier", Sluice: AnnotationLimitBurst, Support: NginxPolicyDifferent, Default: "5",
		Note: "the burst is limit-rps × multiplier requests at once (nginx admits one more); with limit-rps and limit-rpm both set it applies to limit-rps only, limit-rpm's bucket is one minute's worth"},
	{Nginx: "limit-connections", Sluice: AnnotationLimitConnections, Support: NginxPolicyDifferent,
		Note: "counts requests in flight per client address (on HTTP/1.1 the same as connections in use)"},
	{Nginx: "limit-rpm", Sluice: AnnotationLimitRPM, Support: NginxPolicySame},
	{Nginx: "limit-rps", Sluice: AnnotationLimitRPS, Support: NginxPolicySame},
	{Nginx: "limit-whitelist", Sluice: AnnotationLimitExemptSourceRange, Support: NginxPolicySame},
	{Nginx: "proxy-body-size", Sluice: AnnotationMaxBodySize, Support: NginxPolicySame, Default: "1m",
		Note: "ingress-nginx's 1m default applies to every Ingress it serves; sluice applies none unless the annotation is set"},
	{Nginx: "proxy-read-timeout", Sluice: AnnotationProxyReadTimeout, Support: NginxPolicySame, Default: "60",
		Note: "also bounds the wait for the response header (sluice.dev/response-timeout, unless that is set), as in nginx; unset, the proxy's --upstream-response-timeout applies and body reads are not bounded"},
	{Nginx: "proxy-send-timeout", Sluice: AnnotationProxySendTimeout, Support: NginxPolicySame, Default: "60",
		Note: "unset, request writes are not bounded"},
	{Nginx: "whitelist-source-range", Sluice: AnnotationAllowSourceRange, Support: NginxPolicySame},
}

// NginxLimitStatus is ingress-nginx's limit-req-status-code and
// limit-conn-status-code default (a ConfigMap key, not an annotation),
// used for limited requests in compatibility mode.
const NginxLimitStatus = 503

// NginxPolicyAnnotations converts the ingress-nginx policy annotations of
// ann into sluice.dev ones, with ingress-nginx's defaults, for the
// parsers. A sluice.dev annotation that is set wins over the nginx one.
func NginxPolicyAnnotations(ann map[string]string) map[string]string {
	out := map[string]string{}
	get := func(name string) (string, bool) {
		v, ok := ann[NginxPrefix+name]
		return v, ok
	}
	for _, m := range NginxPolicyTable {
		if m.Sluice == "" {
			continue
		}
		if v, ok := get(m.Nginx); ok {
			out[m.Sluice] = v
		}
	}
	if v, ok := get("allowlist-source-range"); ok { // the newer name wins
		out[AnnotationAllowSourceRange] = v
	}
	if v, ok := get("proxy-read-timeout"); ok { // nginx's read timeout covers the header too
		if _, set := ann[AnnotationResponseTimeout]; !set {
			out[AnnotationResponseTimeout] = v
		}
	}
	if v, ok := get("auth-secret-type"); ok && strings.TrimSpace(v) != "auth-file" {
		out[AnnotationAuthType] = "auth-map" // refused: fails closed
	}
	if _, ok := out[AnnotationCORSEnable]; ok {
		if _, set := out[AnnotationCORSAllowOrigin]; !set {
			out[AnnotationCORSAllowOrigin] = "*"
		}
		if _, set := out[AnnotationCORSMaxAge]; !set {
			out[AnnotationCORSMaxAge] = "1728000"
		}
		if _, set := out[AnnotationCORSAllowCredentials]; !set && strings.TrimSpace(out[AnnotationCORSAllowOrigin]) != "*" {
			out[AnnotationCORSAllowCredentials] = "true"
		}
	}
	_, rps := out[AnnotationLimitRPS]
	_, rpm := out[AnnotationLimitRPM]
	_, conns := out[AnnotationLimitConnections]
	if rps || rpm {
		mult := 5
		if v, ok := get("limit-burst-multiplier"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 1 && n <= 1000 {
				mult = n
			}
		}
		rate := out[AnnotationLimitRPS]
		if !rps {
			rate = out[AnnotationLimitRPM]
		}
		if n, err := strconv.Atoi(strings.TrimSpace(rate)); err == nil && n > 0 && n <= MaxLimit/mult {
			out[AnnotationLimitBurst] = strconv.Itoa(n * mult)
		} else {
			delete(out, AnnotationLimitBurst)
		}
	} else {
		delete(out, AnnotationLimitBurst)
	}
	if rps || rpm || conns {
		out[AnnotationLimitStatus] = strconv.Itoa(NginxLimitStatus)
	}
	for k, v := range ann {
		if strings.HasPrefix(k, "sluice.dev/") {
			out[k] = v
		}
	}
	return out
}

// nginxPolicyRow returns the NginxPolicyTable row of an ingress-nginx
// annotation name (without NginxPrefix); allowlist-source-range, the newer
// name of whitelist-source-range, counts as that row.
func nginxPolicyRow(name string) (NginxMapping, bool) {
	if name == "allowlist-source-range" {
		name = "whitelist-source-range"
	}
	for _, m := range NginxPolicyTable {
		if m.Nginx == name {
			return m, true
		}
	}
	return NginxMapping{}, false
}
