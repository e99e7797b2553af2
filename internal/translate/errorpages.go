package translate

import (
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// Annotations of custom error pages (route.ErrorPages, ingress-nginx's
// custom-http-errors semantics): when the upstream answers one of the
// listed statuses, the proxy answers with the same status and the page
// that the error Service returns for a GET carrying X-Code (the status)
// and X-Format (the client's Accept).
const (
	// AnnotationCustomHTTPErrors lists statuses from 400 to 599,
	// comma-separated, at most 50.
	AnnotationCustomHTTPErrors = "sluice.dev/custom-http-errors"
	// AnnotationErrorBackend names the error Service of the Ingress's own
	// namespace, "name" (port 80) or "name:port".
	AnnotationErrorBackend = "sluice.dev/error-backend"
)

const maxErrorCodes = 50

func (b *builder) errorPages(ing *networkingv1.Ingress, errs []annotationError) (*route.ErrorPages, []annotationError) {
	ann, _ := b.annotations(ing) // nginx.go: the nginx names translated
	codesV, codesSet := ann[AnnotationCustomHTTPErrors]
	svcV, svcSet := ann[AnnotationErrorBackend]
	if !codesSet {
		if svcSet {
			errs = append(errs, annotationError{AnnotationErrorBackend, "has no effect without " + AnnotationCustomHTTPErrors})
		}
		return nil, errs
	}
	codes, ok := parseStatusList(codesV)
	if !ok {
		errs = append(errs, annotationError{AnnotationCustomHTTPErrors, "must be statuses from 400 to 599 separated by commas, at most 50; invalid entries are left out"})
	}
	if len(codes) == 0 {
		return nil, errs
	}
	if !svcSet {
		errs = append(errs, annotationError{AnnotationCustomHTTPErrors, "has no effect without " + AnnotationErrorBackend + " (a Service of the namespace of the Ingress)"})
		return nil, errs
	}
	name, port, valid := parseServicePort(svcV)
	if !valid {
		errs = append(errs, annotationError{AnnotationErrorBackend, "must be the name of a Service of the namespace of the Ingress, with an optional :port (default 80); no error pages"})
		return nil, errs
	}
	b.use("s:" + ing.Namespace + "/" + name)
	if b.services[ing.Namespace+"/"+name] == nil {
		b.problem(ing, "ServiceNotFound", "annotation "+AnnotationErrorBackend+": service "+ing.Namespace+"/"+name+" not found; the listed statuses get a short answer of the proxy instead of a page")
		p := strconv.Itoa(port)
		return &route.ErrorPages{Codes: codes, Backend: &route.Backend{
			Name: ing.Namespace + "/" + name + ":" + p, Namespace: ing.Namespace, Service: name, Port: p}}, errs
	}
	ib := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: name, Port: networkingv1.ServiceBackendPort{Number: int32(port)}}}
	be := b.backendFor(ing, &ib, route.Policy{Retries: -1}, upstreamAnnotations{}, "annotation "+AnnotationErrorBackend)
	if be == nil {
		return nil, errs
	}
	return &route.ErrorPages{Codes: codes, Backend: be}, errs
}

func parseStatusList(v string) ([]int, bool) {
	ok := true
	if len(v) > maxListLen {
		v, ok = v[:maxListLen], false
	}
	var out []int
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 400 || n > 599 {
			ok = false
			continue
		}
		if len(out) == maxErrorCodes {
			ok = false
			break
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, ok
}

// parseServicePort reads "name" or "name:port".
func parseServicePort(v string) (string, int, bool) {
	name, p, hasPort := strings.Cut(strings.TrimSpace(v), ":")
	if len(validation.IsDNS1123Label(name)) > 0 {
		return "", 0, false
	}
	port := 80
	if hasPort {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, false
		}
		port = n
	}
	return name, port, true
}
