package translate

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNginxTable: the table is sorted and unique by Name (nginxRow
// searches it), supported rows name a sluice.dev annotation, refused and
// unsupported rows none.
func TestNginxTable(t *testing.T) {
	if !slices.IsSortedFunc(nginxAnnotations, func(a, b NginxAnnotation) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("nginxAnnotations is not sorted by Name")
	}
	for i, r := range nginxAnnotations {
		if i > 0 && nginxAnnotations[i-1].Name == r.Name {
			t.Errorf("row %s twice", r.Name)
		}
		if (r.Status == NginxSupported) != strings.HasPrefix(r.Native, "sluice.dev/") {
			t.Errorf("row %s: status %d, native %q", r.Name, r.Status, r.Native)
		}
		if got, ok := nginxRow(r.Name); !ok || got.Name != r.Name {
			t.Errorf("nginxRow(%s) = %+v, %v", r.Name, got, ok)
		}
	}
	for _, n := range []string{"server-snippet", "some-new-snippet", "lua-resty-waf", "lua-resty-waf-debug"} {
		if r, ok := nginxRow(n); !ok || r.Status != NginxRefused {
			t.Errorf("%s: %+v %v, want refused", n, r, ok)
		}
	}
	if _, ok := nginxRow("enable-cors-or-so"); ok {
		t.Error("an unknown annotation has a row")
	}
}

// TestNginxClasses: with compatibility, the configured class name and
// every class of ingress-nginx's controller are served with nginx
// semantics; without it, none is.
func TestNginxClasses(t *testing.T) {
	classes := []*networkingv1.IngressClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "public-nginx"}, Spec: networkingv1.IngressClassSpec{Controller: IngressNginxController}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}},
	}
	ing := func(class string, legacy bool) *networkingv1.Ingress {
		i := &networkingv1.Ingress{}
		if legacy {
			i.Annotations = map[string]string{annotationIngressClass: class}
		} else {
			i.Spec.IngressClassName = &class
		}
		return i
	}
	on := NewClassFilter(classes, Options{IngressNginx: &IngressNginx{Class: "legacy"}})
	off := NewClassFilter(classes, Options{})
	for _, tc := range []struct {
		ing           *networkingv1.Ingress
		serves, ngx   bool
		servedWithout bool
	}{
		{ing("public-nginx", false), true, true, false},
		{ing("legacy", true), true, true, false},
		{ing("nginx", false), false, false, false}, // the class name is "legacy" here
		{ing("sluice", false), true, false, true},
	} {
		if on.Serves(tc.ing) != tc.serves || on.Nginx(tc.ing) != tc.ngx || off.Serves(tc.ing) != tc.servedWithout || off.Nginx(tc.ing) {
			t.Errorf("%+v: on serves %v nginx %v, off serves %v", tc.ing, on.Serves(tc.ing), on.Nginx(tc.ing), off.Serves(tc.ing))
		}
	}
}

// TestNginxPolicyNames: under compatibility the request policies' nginx
// names (nginxpolicy.go) convert with ingress-nginx's defaults, count as
// supported (no UnsupportedAnnotations), and the unsupported ones of that
// table are listed.
func TestNginxPolicyNames(t *testing.T) {
	out, res := nginxToNative(map[string]string{
		NginxAnnotationPrefix + "whitelist-source-range": "10.0.0.0/8",
		NginxAnnotationPrefix + "limit-rps":              "5",
		NginxAnnotationPrefix + "enable-cors":            "true",
		NginxAnnotationPrefix + "rewrite-target":         "/$1",
		NginxAnnotationPrefix + "proxy-send-timeout":     "30",
		NginxAnnotationPrefix + "proxy-read-timeout":     "120",
		NginxAnnotationPrefix + "proxy-buffering":        "on",
	})
	for k, want := range map[string]string{
		AnnotationAllowSourceRange: "10.0.0.0/8",
		AnnotationLimitRPS:         "5",
		AnnotationLimitStatus:      "503",
		AnnotationCORSEnable:       "true",
		AnnotationCORSAllowOrigin:  "*",
		AnnotationRewriteTarget:    "/$1",
		AnnotationProxySendTimeout: "30",
		AnnotationProxyReadTimeout: "120",
		AnnotationResponseTimeout:  "120", // nginx's read timeout covers the header
	} {
		if out[k] != want {
			t.Errorf("%s = %q, want %q (all: %v)", k, out[k], want, out)
		}
	}
	for k := range out {
		if strings.HasPrefix(k, NginxAnnotationPrefix) {
			t.Errorf("nginx annotation %s left in the native set", k)
		}
	}
	if len(res.unsupported) != 1 || res.unsupported[0] != NginxAnnotationPrefix+"proxy-buffering" {
		t.Errorf("unsupported %v, want only proxy-buffering", res.unsupported)
	}
}
