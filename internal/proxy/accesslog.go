package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Access log fields, in the order they are written. AccessLogFields
// selects them; DefaultAccessLogFields is every field but the query
// string (it may carry tokens, so logging it is a choice).
var accessLogFields = []string{
	"method", "host", "path", "query", "protocol", "status", "bytes", "request_bytes",
	"duration_seconds", "upstream", "upstream_seconds", "retries", "ingress", "service",
	"client", "user_agent", "referer", "request_id", "tls_version", "sni",
}

// DefaultAccessLogFields are the access log's fields when none are chosen.
var DefaultAccessLogFields = slices.DeleteFunc(slices.Clone(accessLogFields), func(f string) bool { return f == "query" })

// CheckAccessLogFields reports an unknown field among names.
func CheckAccessLogFields(names []string) error {
	_, err := parseAccessFields(names)
	return err
}

// AccessLogFieldNames lists every field the access log can write.
func AccessLogFieldNames() []string { return slices.Clone(accessLogFields) }

// accessFields is a set of access log fields, bit i for accessLogFields[i].
type accessFields uint32

// parseAccessFields checks names against the known fields; nil or empty
// means DefaultAccessLogFields.
func parseAccessFields(names []string) (accessFields, error) {
	if len(names) == 0 {
		names = DefaultAccessLogFields
	}
	var f accessFields
	for _, n := range names {
		i := slices.Index(accessLogFields, strings.TrimSpace(n))
		if i < 0 {
			return 0, fmt.Errorf("unknown access log field %q (fields: %s)", n, strings.Join(accessLogFields, ", "))
		}
		f |= 1 << i
	}
	return f, nil
}

// tlsVersions names the TLS versions in the access log.
var tlsVersions = map[uint16]string{tls.VersionTLS10: "1.0", tls.VersionTLS11: "1.1", tls.VersionTLS12: "1.2", tls.VersionTLS13: "1.3"}

// logAccess writes r's access log line with the chosen fields; durations
// are seconds.
func (p *Proxy) logAccess(r *http.Request, rv *routeView, o outcome, d time.Duration) {
	var attrs [24]slog.Attr
	a := attrs[:0]
	header := func(name string) string {
		if v := r.Header[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	for i, name := range accessLogFields {
		if p.accessFields&(1<<i) == 0 {
			continue
		}
		switch name {
		case "method":
			a = append(a, slog.String(name, r.Method))
		case "host":
			a = append(a, slog.String(name, r.Host))
		case "path":
			a = append(a, slog.String(name, r.URL.Path))
		case "query":
			a = append(a, slog.String(name, r.URL.RawQuery))
		case "protocol":
			a = append(a, slog.String(name, r.Proto))
		case "status":
			a = append(a, slog.Int(name, o.status))
		case "bytes":
			a = append(a, slog.Int64(name, o.bytes))
		case "request_bytes":
			n := max(r.ContentLength, 0) // declared, when the body was not forwarded
			if o.body != nil {
				n = o.body.got.Load()
			}
			a = append(a, slog.Int64(name, n))
		case "duration_seconds":
			a = append(a, slog.Float64(name, d.Seconds()))
		case "upstream":
			a = append(a, slog.String(name, o.upstream))
		case "upstream_seconds":
			a = append(a, slog.Float64(name, o.upstreamTime.Seconds()))
		case "retries":
			a = append(a, slog.Int(name, o.retries))
		case "ingress":
			a = append(a, slog.String(name, rv.ingress))
		case "service":
			a = append(a, slog.String(name, rv.service))
		case "client":
			a = append(a, slog.String(name, p.clientIP(r)))
		case "user_agent":
			a = append(a, slog.String(name, header("User-Agent")))
		case "referer":
			a = append(a, slog.String(name, header("Referer")))
		case "request_id":
			a = append(a, slog.String(name, header("X-Request-Id")))
		case "tls_version", "sni":
			v := ""
			if r.TLS != nil {
				v = r.TLS.ServerName
				if name == "tls_version" {
					v = tlsVersions[r.TLS.Version]
				}
			}
			a = append(a, slog.String(name, v))
		}
	}
	p.access.LogAttrs(r.Context(), slog.LevelInfo, "request", a...)
}
