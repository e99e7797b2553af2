package problems

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/translate"
)

// TestIngressNginxEvents: under --ingress-nginx-compat an Ingress of the
// nginx class gets a Warning Event naming each snippet annotation and ONE
// Event listing the unsupported ones; without it, none (not ours).
func TestIngressNginxEvents(t *testing.T) {
	ing := ingress("legacy", "web", map[string]string{
		"nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers x;",
		"nginx.ingress.kubernetes.io/enable-cors":           "true",
		"nginx.ingress.kubernetes.io/proxy-buffering":       "on",
		"nginx.ingress.kubernetes.io/rewrite-target":        "/",
	}, 1)
	cls := "nginx"
	ing.Spec.IngressClassName = &cls
	for _, compat := range []bool{true, false} {
		c := ct.NewClient(interceptor.Funcs{}, ing, service("web"))
		rec := &ct.Recorder{}
		o := Options{Client: c, Notices: &ct.Notices{Recorder: rec}}
		if compat {
			o.IngressNginx = &translate.IngressNginx{}
		}
		r, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, e := range rec.Events() {
			got[e.Reason] = append(got[e.Reason], e.Note)
		}
		if !compat {
			if len(got) != 0 {
				t.Errorf("without compatibility: events %v", got)
			}
			continue
		}
		if s := got[translate.ReasonSnippetRefused]; len(s) != 1 || !strings.Contains(s[0], "configuration-snippet") {
			t.Errorf("SnippetRefused events %q", s)
		}
		if u := got[translate.ReasonUnsupportedAnnotations]; len(u) != 1 || strings.Contains(u[0], "enable-cors") || !strings.Contains(u[0], "proxy-buffering") {
			t.Errorf("UnsupportedAnnotations events %q", u)
		}
		if len(got[translate.ReasonNotServed]) != 0 {
			t.Errorf("the Ingress is not served: %v", got)
		}
	}
}
