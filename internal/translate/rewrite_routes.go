package translate

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

// routePath turns a checked path of the Ingress into its route type and
// path: a regex path when the Ingress's paths are regular expressions.
// The message is "" when the path is usable.
func (a *l7Annotations) routePath(pt route.PathType, path string) (route.PathType, string, string) {
	pt = a.pathType(pt)
	if pt != route.PathRegex {
		return pt, path, ""
	}
	p, msg := a.regexPath(path)
	if msg != "" {
		return pt, "", msg + " (" + AnnotationUseRegex + ")"
	}
	return pt, p, ""
}

// addAppRoot adds, for each of the Ingress's hosts, an Exact "/" route
// answering with a 302 to the app root (AnnotationAppRoot). A host whose
// "/" is routed exactly already keeps that route.
func (b *builder) addAppRoot(ing *networkingv1.Ingress, id string, hosts []string, l7 *l7Annotations, hp httpsPolicy) {
	if l7.appRoot == "" {
		return
	}
	for _, h := range hosts {
		vh := b.vhosts[h]
		if vh == nil {
			continue
		}
		var be *route.Backend
		for i := range vh.routes {
			if vh.routes[i].Ingress == id {
				be = vh.routes[i].Backend
				break
			}
		}
		if be == nil {
			continue // none of the Ingress's paths is served on h
		}
		mk := matchKey(route.PathExact, "/")
		if owner, taken := vh.owners[mk]; taken {
			b.problem(ing, "Conflict", fmt.Sprintf("annotation %s: host %s already has an Exact / route (Ingress %s); no app-root redirect there", AnnotationAppRoot, h, owner))
			continue
		}
		vh.owners[mk] = id
		vh.routes = append(vh.routes, route.Route{PathType: route.PathExact, Path: "/", Backend: be, Ingress: id,
			SSLRedirect: hp.redirect, HSTS: hp.hsts,
			Filters: &route.Filters{Redirect: &route.Redirect{StatusCode: 302, Path: &route.PathModifier{Type: route.ReplaceFullPath, Value: l7.appRoot}}}})
	}
}
