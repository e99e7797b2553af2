package explain

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testcert"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is when every recorded state was read.
var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// TestGolden explains each recorded state of testdata: base.yaml with the
// case's state.yaml laid over it (an object replaces the base's of the
// same kind, namespace and name; a document starting "# delete" removes
// it), and compares the text with the case's golden.txt.
func TestGolden(t *testing.T) {
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	base := decode(t, filepath.Join("testdata", "base.yaml"))
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		t.Run(d.Name(), func(t *testing.T) {
			dir := filepath.Join("testdata", d.Name())
			raw, err := os.ReadFile(filepath.Join(dir, "state.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			objs := overlay(base, decode(t, filepath.Join(dir, "state.yaml")))
			if !strings.Contains(string(raw), "secret: none") {
				crt, key := testcert.SelfSigned(t, "shop.a.test")
				objs = append(objs, object{obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop-tls"},
					Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}})
			}
			s := state(objs)
			var got Report
			switch target := directive(string(raw), "# explain:"); {
			case strings.HasPrefix(target, "gateway "):
				s.Namespace, s.Name, _ = strings.Cut(strings.TrimPrefix(target, "gateway "), "/")
				for i := range objs {
					if gw, ok := objs[i].obj.(*gatewayv1.Gateway); ok && gw.Namespace == s.Namespace && gw.Name == s.Name {
						s.Gateway = gw
					}
				}
				got = Gateway(s)
			case strings.HasPrefix(target, "binding "):
				s.Namespace, s.Name, _ = strings.Cut(strings.TrimPrefix(target, "binding "), "/")
				for i := range s.Bindings {
					if s.Bindings[i].Namespace == s.Namespace && s.Bindings[i].Name == s.Name {
						s.Binding = &s.Bindings[i]
					}
				}
				got = Binding(s)
			default:
				s.Namespace, s.Name = "team-a", "shop"
				if target != "" {
					s.Namespace, s.Name, _ = strings.Cut(target, "/")
				}
				for i := range objs {
					if ing, ok := objs[i].obj.(*networkingv1.Ingress); ok && ing.Namespace == s.Namespace && ing.Name == s.Name {
						s.Ingress = ing
					}
				}
				got = Ingress(s)
			}
			golden := filepath.Join(dir, "golden.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("explain %s:\n%s\nwant:\n%s", d.Name(), got, want)
			}
			if strings.HasPrefix(d.Name(), "healthy") || d.Name() == "binding" || d.Name() == "gateway-healthy" {
				if !got.Healthy() {
					t.Errorf("a healthy chain has causes: %v", got.Causes)
				}
			} else if got.Healthy() {
				t.Errorf("a broken chain (%s) has no cause", d.Name())
			}
		})
	}
}

type object struct {
	obj    client.Object
	delete bool
}

func directive(raw, prefix string) string {
	for _, l := range strings.Split(raw, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(l, prefix))
		}
	}
	return ""
}

// decode reads the objects of a multi-document YAML file.
func decode(t *testing.T, path string) []object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gatewayv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	var out []object
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if !strings.Contains(doc, "\nkind:") && !strings.HasPrefix(doc, "kind:") {
			continue
		}
		o, _, err := dec.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, object{obj: o.(client.Object), delete: strings.HasPrefix(doc, "# delete")})
	}
	return out
}

func id(o client.Object) string {
	return typeName(o) + " " + o.GetNamespace() + "/" + o.GetName()
}

func typeName(o client.Object) string {
	switch o.(type) {
	case *networkingv1.Ingress:
		return "*v1.Ingress"
	case *networkingv1.IngressClass:
		return "*v1.IngressClass"
	case *corev1.Service:
		return "*v1.Service"
	case *corev1.Pod:
		return "*v1.Pod"
	case *corev1.Secret:
		return "*v1.Secret"
	case *discoveryv1.EndpointSlice:
		return "*v1.EndpointSlice"
	case *eventsv1.Event:
		return "*v1.Event"
	case *v1alpha1.LoadBalancerBinding:
		return "*v1alpha1.LoadBalancerBinding"
	case *gatewayv1.Gateway:
		return "*v1.Gateway"
	case *gatewayv1.GatewayClass:
		return "*v1.GatewayClass"
	case *gatewayv1.HTTPRoute:
		return "*v1.HTTPRoute"
	case *gatewayv1.GRPCRoute:
		return "*v1.GRPCRoute"
	}
	return "*v1.Unknown"
}

// overlay lays over on base.
func overlay(base, over []object) []object {
	out := append([]object(nil), base...)
	for _, o := range over {
		replaced := false
		for i := range out {
			if id(out[i].obj) == id(o.obj) {
				out[i], replaced = o, true
			}
		}
		if !replaced && !o.delete {
			out = append(out, o)
		}
	}
	kept := out[:0]
	for _, o := range out {
		if !o.delete {
			kept = append(kept, o)
		}
	}
	return kept
}

func state(objs []object) State {
	s := State{ControllerNamespace: "sluice-system", Now: now}
	for _, o := range objs {
		switch x := o.obj.(type) {
		case *networkingv1.IngressClass:
			s.Classes = append(s.Classes, *x)
		case *v1alpha1.LoadBalancerBinding:
			s.Bindings = append(s.Bindings, *x)
		case *corev1.Service:
			s.Services = append(s.Services, *x)
		case *discoveryv1.EndpointSlice:
			s.EndpointSlices = append(s.EndpointSlices, *x)
		case *corev1.Secret:
			s.Secrets = append(s.Secrets, *x)
		case *corev1.Pod:
			s.Pods = append(s.Pods, *x)
		case *eventsv1.Event:
			s.Events = append(s.Events, *x)
		case *gatewayv1.GatewayClass:
			s.GatewayClasses = append(s.GatewayClasses, *x)
		case *gatewayv1.HTTPRoute:
			s.HTTPRoutes = append(s.HTTPRoutes, *x)
		case *gatewayv1.GRPCRoute:
			s.GRPCRoutes = append(s.GRPCRoutes, *x)
		}
	}
	return s
}
