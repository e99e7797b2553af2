package translate

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// Annotations of external (forward) authentication (route.ForwardAuth):
// before a request is forwarded, the proxy sends a GET with the request's
// header to the auth URL; 2xx lets it through, 401 and 403 go back to the
// client, anything else (an error, a timeout, another status) is a 500:
// it fails closed.
//
// The auth URL is written by the tenant, so by default it may name only a
// Service of the Ingress's own namespace ("http://SERVICE[.NAMESPACE.svc
// [.cluster.local]][:PORT]/path"): the proxy sends the sub-request to that
// Service's endpoints, as it does for the Ingress's backends, and a tenant
// cannot make the proxy reach another namespace, the node, the cloud
// metadata service or the Internet. An operator who runs an external
// identity service allows any http(s) URL with --forward-auth-any-url
// (Options.ForwardAuthAnyURL).
const (
	// AnnotationAuthURL is the auth URL.
	AnnotationAuthURL = "sluice.dev/auth-url"
	// AnnotationAuthSignin: an http(s) URL; a 401 of the auth service
	// becomes a 302 to it, with the original URL in the query parameter
	// "rd" (as ingress-nginx's auth-signin).
	AnnotationAuthSignin = "sluice.dev/auth-signin"
	// AnnotationAuthResponseHeaders: header names, comma-separated, copied
	// from the auth service's 2xx answer into the upstream request (a
	// client's own value of those headers is always removed).
	AnnotationAuthResponseHeaders = "sluice.dev/auth-response-headers"
	// AnnotationAuthTimeout bounds the sub-request; seconds or a Go
	// duration up to 60s, default DefaultAuthTimeout.
	AnnotationAuthTimeout = "sluice.dev/auth-timeout"
)

// Forward-auth defaults and limits.
const (
	DefaultAuthTimeout = 5 * time.Second
	maxAuthTimeout     = time.Minute
	maxURLLen          = 2048
)

// forwardAuth reads the forward-auth annotations of ing.
func (b *builder) forwardAuth(ing *networkingv1.Ingress, errs []annotationError) (*route.ForwardAuth, []annotationError) {
	ann, _ := b.annotations(ing) // nginx.go: the nginx names translated
	raw, on := ann[AnnotationAuthURL]
	if !on {
		for _, k := range []string{AnnotationAuthSignin, AnnotationAuthResponseHeaders, AnnotationAuthTimeout} {
			if _, ok := ann[k]; ok {
				errs = append(errs, annotationError{k, "has no effect without " + AnnotationAuthURL})
			}
		}
		return nil, errs
	}
	fa := &route.ForwardAuth{Timeout: DefaultAuthTimeout, Refuse: true}
	if v, ok := ann[AnnotationAuthTimeout]; ok {
		d, valid := parseDuration(v, maxAuthTimeout)
		if !valid || d == 0 {
			errs = append(errs, annotationError{AnnotationAuthTimeout, "must be a duration (e.g. 2s) or seconds from 1 to 60; using 5s"})
		} else {
			fa.Timeout = d
		}
	}
	if v, ok := ann[AnnotationAuthResponseHeaders]; ok {
		list, valid := parseTokenList(v)
		if !valid {
			errs = append(errs, annotationError{AnnotationAuthResponseHeaders, "must be header names separated by commas, at most 100; invalid entries are left out"})
		}
		if list != "" {
			fa.ResponseHeaders = strings.Split(list, ", ")
		}
	}
	if v, ok := ann[AnnotationAuthSignin]; ok {
		u, valid := parseHTTPURL(v)
		if !valid {
			errs = append(errs, annotationError{AnnotationAuthSignin, "must be an absolute http or https URL without user information, at most 2048 characters; a 401 is passed on"})
		} else {
			fa.SignIn = u.String()
		}
	}
	u, valid := parseHTTPURL(raw)
	if !valid {
		errs = append(errs, annotationError{AnnotationAuthURL, "must be an absolute http or https URL without user information, at most 2048 characters; the routes answer 503"})
		return fa, errs
	}
	fa.Path = u.EscapedPath()
	if fa.Path == "" {
		fa.Path = "/"
	}
	if u.RawQuery != "" {
		fa.Path += "?" + u.RawQuery
	}
	svc, port, inNamespace := serviceHost(u, ing.Namespace)
	if inNamespace {
		b.use("s:" + ing.Namespace + "/" + svc)
	}
	switch {
	case inNamespace && b.services[ing.Namespace+"/"+svc] == nil:
		b.problem(ing, "ServiceNotFound", "annotation "+AnnotationAuthURL+": service "+ing.Namespace+"/"+svc+" not found; the routes answer 503")
	case inNamespace:
		ib := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: svc, Port: networkingv1.ServiceBackendPort{Number: int32(port)}}}
		fa.Backend = b.backendFor(ing, &ib, route.Policy{Retries: -1}, upstreamAnnotations{}, "annotation "+AnnotationAuthURL)
		fa.Host = u.Host
		fa.Refuse = fa.Backend == nil
	case b.opts.ForwardAuthAnyURL:
		fa.URL = u.String()
		fa.Refuse = false
	default:
		errs = append(errs, annotationError{AnnotationAuthURL, "must be http://SERVICE.NAMESPACE.svc[:PORT]/path naming a Service of the namespace of the Ingress (other URLs need the proxy flag --forward-auth-any-url); the routes answer 503"})
	}
	return fa, errs
}

// parseHTTPURL accepts an absolute http or https URL with a host, without
// user information or fragment.
func parseHTTPURL(v string) (*url.URL, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxURLLen || !isVisibleASCII(v) {
		return nil, false
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return nil, false
	}
	return u, true
}

// serviceHost reports whether u names a Service of namespace ns over plain
// HTTP: host "svc", "svc.ns", "svc.ns.svc" or "svc.ns.svc.cluster.local"
// (any cluster domain), and its port (default 80).
func serviceHost(u *url.URL, ns string) (svc string, port int, ok bool) {
	if u.Scheme != "http" {
		return "", 0, false
	}
	host := strings.ToLower(u.Hostname())
	port = 80
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, false
		}
		port = n
	}
	labels := strings.Split(host, ".")
	svc = labels[0]
	if len(validation.IsDNS1123Label(svc)) > 0 {
		return "", 0, false
	}
	switch {
	case len(labels) == 1:
	case labels[1] != ns:
		return "", 0, false
	case len(labels) == 2:
	case labels[2] != "svc":
		return "", 0, false
	}
	return svc, port, true
}

// isVisibleASCII reports printable ASCII without spaces.
func isVisibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
