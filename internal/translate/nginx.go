package translate

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// ingress-nginx compatibility (issue 27, --ingress-nginx-compat). With
// Options.IngressNginx set, the Ingresses of an ingress-nginx class are
// served too, and their nginx.ingress.kubernetes.io/* annotations are read
// through nginxAnnotations below with ingress-nginx's semantics:
//
//   - a supported annotation's value goes to the sluice.dev annotation of
//     the same feature (Native), through Convert when the syntax differs,
//     and the native parser runs in nginx mode (parseL7's nginx flag: a
//     rewrite-target makes the Ingress's paths case-insensitive regular
//     expressions, as ingress-nginx does);
//   - a refused one (configuration, server, auth, stream, modsecurity
//     snippets; Lua) is a ReasonSnippetRefused problem naming it (a
//     Warning Event); the rest of the Ingress is served;
//   - every other nginx annotation, known or not, is listed in ONE
//     ReasonUnsupportedAnnotations problem of the Ingress.
//
// sluice.dev/* annotations on such an Ingress are read as well; a
// supported nginx annotation wins over the native one it maps to.
//
// The table's shape (nginxAnnotations, below): one NginxAnnotation per
// ingress-nginx annotation, sorted by Name (the part after
// NginxAnnotationPrefix; nginxRow binary-searches, TestNginxTable checks
// the order):
//
//	{Name: "rewrite-target", Native: AnnotationRewriteTarget, Note: "..."} // supported: value → Native
//	{Name: "x", Native: AnnotationX, Convert: convertX}                    // supported, syntax converted
//	{Name: "server-snippet", Status: NginxRefused}                         // refused (any *-snippet and lua-* are, without a row)
//	{Name: "canary-by-header-pattern", Status: NginxUnsupported}           // known, listed as unsupported
//
// Annotations without a row are unsupported. Adding a feature's rows is
// all the compatibility needs, once its native annotation exists.

// IngressNginxController is the spec.controller of ingress-nginx's
// IngressClasses.
const IngressNginxController = "k8s.io/ingress-nginx"

// DefaultIngressNginxClass is the ingress-nginx class name served by
// default: the name the legacy kubernetes.io/ingress.class annotation and
// spec.ingressClassName use when no IngressClass object names the
// controller.
const DefaultIngressNginxClass = "nginx"

// NginxAnnotationPrefix prefixes every ingress-nginx annotation.
const NginxAnnotationPrefix = "nginx.ingress.kubernetes.io/"

// Reasons of the compatibility problems.
const (
	ReasonSnippetRefused         = "SnippetRefused"
	ReasonUnsupportedAnnotations = "UnsupportedAnnotations"
)

// IngressNginx turns the compatibility on (Options.IngressNginx).
type IngressNginx struct {
	// Class is an IngressClass name served with nginx semantics, besides
	// every IngressClass whose spec.controller is IngressNginxController;
	// default DefaultIngressNginxClass.
	Class string
}

// NginxStatus says what sluice does with one ingress-nginx annotation.
type NginxStatus uint8

const (
	// NginxSupported: mapped to Native with ingress-nginx's semantics.
	NginxSupported NginxStatus = iota
	// NginxRefused: a snippet or Lua; refused with a Warning Event.
	NginxRefused
	// NginxUnsupported: an ingress-nginx annotation sluice does not serve;
	// named in the UnsupportedAnnotations Event.
	NginxUnsupported
)

// NginxAnnotation is one row of the compatibility table. The lead adds a
// row per supported annotation; sluice migrate (issue 27, part 3) reads
// the same table.
type NginxAnnotation struct {
	// Name is the annotation without NginxAnnotationPrefix.
	Name   string
	Status NginxStatus
	// Native is the sluice.dev annotation the value is given to
	// (NginxSupported only).
	Native string
	// Convert turns the nginx value into the native one; ok false
	// reports the annotation invalid (not quoting it). nil passes the
	// value unchanged.
	Convert func(v string) (native string, ok bool)
	// Note is a difference from ingress-nginx worth telling a migrating
	// user; "" when it behaves as ingress-nginx does.
	Note string
}

// nginxAnnotations is the compatibility table, sorted by Name.
var nginxAnnotations = []NginxAnnotation{
	{Name: "app-root", Native: AnnotationAppRoot},
	{Name: "auth-snippet", Status: NginxRefused},
	{Name: "canary", Native: AnnotationCanary},
	{Name: "canary-by-cookie", Native: AnnotationCanaryByCookie},
	{Name: "canary-by-header", Native: AnnotationCanaryByHeader},
	{Name: "canary-by-header-pattern", Status: NginxUnsupported},
	{Name: "canary-by-header-value", Native: AnnotationCanaryByHeaderValue},
	{Name: "canary-weight", Native: AnnotationCanaryWeight},
	{Name: "canary-weight-total", Native: AnnotationCanaryWeightTotal},
	{Name: "configuration-snippet", Status: NginxRefused},
	{Name: "modsecurity-snippet", Status: NginxRefused},
	{Name: "permanent-redirect", Native: AnnotationPermanentRedirect, Note: "a URL with a query is refused"},
	{Name: "permanent-redirect-code", Native: AnnotationPermanentRedirectCode, Note: "301 or 308 only"},
	{Name: "rewrite-target", Native: AnnotationRewriteTarget, Note: "only the capture groups $1..$9; no nginx variables"},
	{Name: "server-snippet", Status: NginxRefused},
	{Name: "stream-snippet", Status: NginxRefused},
	{Name: "temporal-redirect", Native: AnnotationTemporaryRedirect, Note: "a URL with a query is refused"},
	{Name: "temporal-redirect-code", Native: AnnotationTemporaryRedirectCode, Note: "302 or 307 only"},
	{Name: "upstream-vhost", Native: AnnotationUpstreamVhost, Note: "a host name or address; no nginx variables"},
	{Name: "use-regex", Native: AnnotationUseRegex, Note: "regular expressions are RE2 (no backreferences or lookaround); only this Ingress's paths become regexes, not every path of the host"},
	{Name: "x-forwarded-prefix", Native: AnnotationXForwardedPrefix},
}

// NginxAnnotations returns the compatibility table (for sluice migrate
// and documentation); callers must not modify it.
func NginxAnnotations() []NginxAnnotation { return nginxAnnotations }

// nginxRow returns the table row of name (without prefix), and whether
// there is one. Every *-snippet and Lua annotation is refused.
func nginxRow(name string) (NginxAnnotation, bool) {
	i, ok := slices.BinarySearchFunc(nginxAnnotations, name, func(a NginxAnnotation, n string) int { return strings.Compare(a.Name, n) })
	if ok {
		return nginxAnnotations[i], true
	}
	if strings.HasSuffix(name, "-snippet") || strings.HasPrefix(name, "lua-") || strings.Contains(name, "-lua") {
		return NginxAnnotation{Name: name, Status: NginxRefused}, true
	}
	return NginxAnnotation{}, false
}

// nginxResult is what reading an nginx Ingress's annotations found.
type nginxResult struct {
	refused     []string // snippet and Lua annotations
	unsupported []string // every other unsupported one
	invalid     []string // supported ones whose Convert refused the value
}

// annotations returns the annotations of ing as sluice reads them: its
// own, or for an Ingress of an ingress-nginx class under compatibility,
// with the supported nginx annotations translated onto their native
// names. The result must not be modified.
func (b *builder) annotations(ing *networkingv1.Ingress) (map[string]string, *nginxResult) {
	if b.opts.IngressNginx == nil || !b.classes.Nginx(ing) {
		return ing.Annotations, nil
	}
	ann, res := nginxToNative(ing.Annotations)
	return ann, &res
}

// nginxToNative translates ingress-nginx annotations (pure).
func nginxToNative(in map[string]string) (map[string]string, nginxResult) {
	var res nginxResult
	out := maps.Clone(in)
	// The request policies (nginxpolicy.go) convert as a group: their
	// defaults depend on each other.
	policies := NginxPolicyAnnotations(in)
	for k, v := range in {
		name, ok := strings.CutPrefix(k, NginxAnnotationPrefix)
		if !ok {
			continue
		}
		delete(out, k)
		if m, ok := nginxPolicyRow(name); ok {
			if m.Support == NginxPolicyUnsupported {
				res.unsupported = append(res.unsupported, k)
			}
			continue
		}
		row, known := nginxRow(name)
		switch {
		case !known || row.Status == NginxUnsupported:
			res.unsupported = append(res.unsupported, k)
		case row.Status == NginxRefused:
			res.refused = append(res.refused, k)
		case row.Convert != nil:
			nv, ok := row.Convert(v)
			if !ok {
				res.invalid = append(res.invalid, k)
				continue
			}
			out[row.Native] = nv
		default:
			out[row.Native] = v
		}
	}
	maps.Copy(out, policies)
	slices.Sort(res.refused)
	slices.Sort(res.unsupported)
	slices.Sort(res.invalid)
	return out, res
}

// reportNginx turns what nginxToNative found into problems of ing.
func (b *builder) reportNginx(ing *networkingv1.Ingress, res *nginxResult) {
	if res == nil {
		return
	}
	for _, k := range res.refused {
		b.problem(ing, ReasonSnippetRefused, "annotation "+annotationName(k)+": configuration snippets and Lua are not supported (sluice runs no nginx); ignored, the rest of the Ingress is served")
	}
	for _, k := range res.invalid {
		b.problem(ing, "InvalidAnnotation", "annotation "+annotationName(k)+": invalid value; ignored")
	}
	if n := len(res.unsupported); n > 0 {
		names := make([]string, 0, min(n, maxListed))
		for _, k := range res.unsupported[:min(n, maxListed)] {
			names = append(names, annotationName(k))
		}
		more := ""
		if n > maxListed {
			more = " and " + strconv.Itoa(n-maxListed) + " more"
		}
		b.problem(ing, ReasonUnsupportedAnnotations, "annotations not supported by sluice, ignored: "+strings.Join(names, ", ")+more)
	}
}

// maxListed bounds the names one problem lists.
const maxListed = 20

// annotationName returns an annotation key fit for a message: the API
// server validates keys (qualified names), but manifests files are not;
// anything else is replaced.
func annotationName(k string) string {
	if len(k) > 253 {
		return "(an annotation with an invalid name)"
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			return "(an annotation with an invalid name)"
		}
	}
	return k
}

// addNginxClasses adds the ingress-nginx classes to f when opts asks for
// compatibility: Class, and every IngressClass of IngressNginxController.
func (f *ClassFilter) addNginxClasses(classes []*networkingv1.IngressClass, opts Options) {
	if opts.IngressNginx == nil {
		return
	}
	name := opts.IngressNginx.Class
	if name == "" {
		name = DefaultIngressNginxClass
	}
	f.nginx = map[string]bool{name: true}
	for _, c := range classes {
		if c != nil && c.Spec.Controller == IngressNginxController {
			f.nginx[c.Name] = true
		}
	}
	for _, c := range classes {
		if c != nil && f.nginx[c.Name] && c.Annotations[annotationDefaultClass] == "true" {
			f.serveNoClass, f.nginxDefault = true, true
		}
	}
	for n := range f.nginx {
		f.ours[n] = true
	}
}

// Nginx reports whether ing is of an ingress-nginx class served under
// compatibility (false without it).
func (f ClassFilter) Nginx(ing *networkingv1.Ingress) bool {
	if f.nginx == nil {
		return false
	}
	if ing.Spec.IngressClassName != nil {
		return f.nginx[*ing.Spec.IngressClassName]
	}
	if v, ok := ing.Annotations[annotationIngressClass]; ok {
		return f.nginx[v]
	}
	return f.nginxDefault
}
