package manifests

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/internal/translate"
)

const multiDoc = `# routes for the demo
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
spec:
  rules:
  - host: shop.example
--- # the backend
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
---
# only a comment
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
endpoints:
- addresses: [10.244.1.10]
ports:
- port: 8080
...
`

func mustDecode(t *testing.T, data string) translate.Input {
	t.Helper()
	in, err := Decode("test.yaml", []byte(data))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return in
}

func TestDecodeMultiDocument(t *testing.T) {
	in := mustDecode(t, multiDoc)
	if len(in.Ingresses) != 1 || len(in.Services) != 1 || len(in.EndpointSlices) != 1 {
		t.Fatalf("got %d ingresses, %d services, %d slices; want 1 each",
			len(in.Ingresses), len(in.Services), len(in.EndpointSlices))
	}
	if ns := in.Ingresses[0].Namespace; ns != "shop" {
		t.Errorf("ingress namespace = %q; want shop", ns)
	}
	svc := in.Services[0]
	if svc.Namespace != "default" {
		t.Errorf("service namespace = %q; want default", svc.Namespace)
	}
	p := svc.Spec.Ports[0]
	if p.Protocol != corev1.ProtocolTCP || p.TargetPort != intstr.FromInt32(80) || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service defaults not applied: %+v type %q", p, svc.Spec.Type)
	}
	eps := in.EndpointSlices[0]
	if eps.Ports[0].Protocol == nil || *eps.Ports[0].Protocol != corev1.ProtocolTCP || eps.Ports[0].Name == nil {
		t.Errorf("endpoint slice port defaults not applied: %+v", eps.Ports[0])
	}
	if eps.Labels[discoveryv1.LabelServiceName] != "web" {
		t.Errorf("slice labels = %v", eps.Labels)
	}
}

func TestDecodeInvalidDocumentSkipped(t *testing.T) {
	data := `apiVersion: v1
kind: Service
metadata: {name: first}
---
apiVersion: v1
kind: Service
metadata: {name: broken}
spec:
  ports:
  - port: "eighty"
---
apiVersion: v1
kind: Service
metadata: {name: third}
`
	in, err := Decode("svc.yaml", []byte(data))
	if len(in.Services) != 2 || in.Services[0].Name != "first" || in.Services[1].Name != "third" {
		t.Fatalf("services = %v; want first and third", names(in))
	}
	var de *DocumentError
	if !errors.As(err, &de) {
		t.Fatalf("error %v; want a *DocumentError", err)
	}
	if de.File != "svc.yaml" || de.Index != 2 || de.Line != 5 {
		t.Errorf("error at %s document %d line %d; want svc.yaml document 2 line 5", de.File, de.Index, de.Line)
	}
	if !strings.Contains(err.Error(), "svc.yaml: document 2 (line 5)") {
		t.Errorf("message %q does not name file and document", err)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "apiVersion and kind are required"},
		{"no name", "apiVersion: v1\nkind: Service\nmetadata: {}\n", "metadata.name is required"},
		{"generateName", "apiVersion: v1\nkind: Service\nmetadata: {generateName: x-}\n", "generateName is not supported"},
		{"old ingress", "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: x}\n", "use apiVersion networking.k8s.io/v1"},
		{"not a mapping", "- a\n- b\n", "not a mapping"},
		{"bad yaml", "apiVersion: v1\nkind: [\n", "parsing YAML"},
		{"bad base64", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\ndata: {tls.crt: '!!!'}\n", "decoding Secret"},
		{"nested list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n", "inside a List"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Decode("x.yaml", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v; want one containing %q", err, tc.want)
			}
			if n := count(in); n != 0 {
				t.Errorf("%d objects decoded from an invalid document", n)
			}
		})
	}
}

func TestDecodeUnknownKindSkipped(t *testing.T) {
	d := decode("x.yaml", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: other}\n"))
	if len(d.invalid) != 0 || len(d.warnings) != 0 {
		t.Fatalf("problems for an unknown kind: %v %v", d.invalid, d.warnings)
	}
	if len(d.skipped) != 1 || d.skipped[0] != "apps/v1 Deployment" {
		t.Errorf("skipped = %v", d.skipped)
	}
	if len(d.objects) != 1 {
		t.Errorf("objects = %d; want 1", len(d.objects))
	}
}

func TestDecodeUnknownFieldLoadsWithWarning(t *testing.T) {
	in, err := Decode("x.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n"))
	if len(in.Services) != 1 {
		t.Fatalf("services = %d; want 1", len(in.Services))
	}
	if err == nil || !strings.Contains(err.Error(), "prots") {
		t.Errorf("error = %v; want the unknown field named", err)
	}
}

func TestDecodeList(t *testing.T) {
	data := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: a}
- apiVersion: networking.k8s.io/v1
  kind: IngressClass
  metadata: {name: sluice, namespace: ignored}
  spec: {controller: sluice.dev/ingress-controller}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: skipped}
- apiVersion: v1
  kind: Service
  metadata: {}
---
apiVersion: v1
kind: ServiceList
items:
- metadata: {name: b, namespace: other}
`
	in, err := Decode("list.yaml", []byte(data))
	var de *DocumentError
	if !errors.As(err, &de) || de.Index != 1 || de.Item != 4 {
		t.Errorf("error = %v; want one for document 1 item 4", err)
	}
	if got := names(in); strings.Join(got, ",") != "IngressClass sluice,Service default/a,Service other/b" {
		t.Errorf("objects = %v", got)
	}
	if ns := in.IngressClasses[0].Namespace; ns != "" {
		t.Errorf("IngressClass namespace = %q; want none (cluster-scoped)", ns)
	}
}

func TestDecodeStringData(t *testing.T) {
	in := mustDecode(t, `apiVersion: v1
kind: Secret
metadata: {name: cert}
type: kubernetes.io/tls
data:
  tls.crt: b2xk
  other: a2VlcA==
stringData:
  tls.crt: new
  tls.key: key
---
apiVersion: v1
kind: Secret
metadata: {name: plain}
stringData: {a: b}
`)
	if len(in.Secrets) != 2 {
		t.Fatalf("secrets = %d; want 2", len(in.Secrets))
	}
	s := in.Secrets[0]
	want := map[string]string{"tls.crt": "new", "tls.key": "key", "other": "keep"}
	if len(s.Data) != len(want) {
		t.Errorf("data = %v; want %v", s.Data, want)
	}
	for k, v := range want {
		if string(s.Data[k]) != v {
			t.Errorf("data[%s] = %q; want %q", k, s.Data[k], v)
		}
	}
	if s.StringData != nil {
		t.Errorf("stringData kept: %v", s.StringData)
	}
	if p := in.Secrets[1]; p.Type != corev1.SecretTypeOpaque || string(p.Data["a"]) != "b" {
		t.Errorf("plain secret = type %q data %v; want Opaque with a=b", p.Type, p.Data)
	}
}

func TestDecodeUIDAndTimestamp(t *testing.T) {
	a := mustDecode(t, "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n")
	again := mustDecode(t, "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 1}]}\n")
	b := mustDecode(t, "apiVersion: v1\nkind: Service\nmetadata: {name: b}\n")
	set := mustDecode(t, "apiVersion: v1\nkind: Service\nmetadata: {name: c, uid: given, creationTimestamp: '2024-01-02T03:04:05Z'}\n")
	ua, ub := a.Services[0].UID, b.Services[0].UID
	if ua == "" || ua != again.Services[0].UID || ua == ub {
		t.Errorf("UIDs a=%q a again=%q b=%q; want stable per object, distinct between objects", ua, again.Services[0].UID, ub)
	}
	if len(ua) != 36 {
		t.Errorf("UID %q not shaped like a UUID", ua)
	}
	if !a.Services[0].CreationTimestamp.IsZero() {
		t.Errorf("creationTimestamp = %v; want zero", a.Services[0].CreationTimestamp)
	}
	c := set.Services[0]
	if c.UID != "given" || c.CreationTimestamp.Year() != 2024 {
		t.Errorf("written uid/creationTimestamp not kept: %q %v", c.UID, c.CreationTimestamp)
	}
}

func TestDecodeDuplicates(t *testing.T) {
	in, err := Decode("d.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 1}]}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: default}\nspec: {ports: [{port: 2}]}\n"))
	if err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("error = %v; want a duplicate reported", err)
	}
	if len(in.Services) != 1 || in.Services[0].Spec.Ports[0].Port != 1 {
		t.Errorf("services = %+v; want only the first", in.Services)
	}
}

func TestSplitDocuments(t *testing.T) {
	data := "---\n# c\n---\na: 1\n---   \nb: 2\n--- {c: 3}\n---x: no\n-----BEGIN\n...\n"
	docs := splitDocuments([]byte(data))
	var got []string
	for _, d := range docs {
		got = append(got, strings.TrimSpace(string(d.data)))
	}
	want := []string{"a: 1", "b: 2", "{c: 3}\n---x: no\n-----BEGIN"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("documents = %q; want %q", got, want)
	}
	if lines := []int{docs[0].line, docs[1].line, docs[2].line}; lines[0] != 4 || lines[1] != 6 || lines[2] != 7 {
		t.Errorf("start lines = %v; want [4 6 7]", lines)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	tcp := corev1.ProtocolTCP
	name := "http"
	objs := []runtime.Object{
		&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"},
			Spec: networkingv1.IngressClassSpec{Controller: translate.ControllerName}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop"},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.10"}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &tcp}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cert", Namespace: "shop"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}},
	}
	data, err := Encode(objs...)
	if err != nil {
		t.Fatal(err)
	}
	if objs[0].GetObjectKind().GroupVersionKind().Kind != "" {
		t.Error("Encode modified its argument")
	}
	in := mustDecode(t, string(data))
	if got := strings.Join(names(in), ","); got != "Ingress shop/web,IngressClass sluice,Service shop/web,EndpointSlice shop/web-1,Secret shop/cert" {
		t.Errorf("round trip = %s\n%s", got, data)
	}
	if p := in.Services[0].Spec.Ports[0]; p.TargetPort != intstr.FromString("http") {
		t.Errorf("targetPort = %v; want http", p.TargetPort)
	}
	if _, err := Encode(&corev1.Pod{}); err == nil {
		t.Error("Encode of a Pod: no error")
	}
}

// names lists "Kind namespace/name" in Input order.
func names(in translate.Input) []string {
	var out []string
	add := func(kind string, m metav1.Object) {
		key := m.GetName()
		if m.GetNamespace() != "" {
			key = m.GetNamespace() + "/" + key
		}
		out = append(out, kind+" "+key)
	}
	for _, o := range in.Ingresses {
		add("Ingress", o)
	}
	for _, o := range in.IngressClasses {
		add("IngressClass", o)
	}
	for _, o := range in.Services {
		add("Service", o)
	}
	for _, o := range in.EndpointSlices {
		add("EndpointSlice", o)
	}
	for _, o := range in.Secrets {
		add("Secret", o)
	}
	return out
}

func count(in translate.Input) int {
	return len(in.Ingresses) + len(in.IngressClasses) + len(in.Services) + len(in.EndpointSlices) + len(in.Secrets)
}

// TestDecodeAgainEqual: a file read again decodes to objects equal to the
// first decode (reflect.DeepEqual), so incremental translation
// (translate.Update) sees no change in the unchanged objects of a file
// that changed elsewhere.
func TestDecodeAgainEqual(t *testing.T) {
	data := []byte(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  creationTimestamp: "2024-05-01T10:00:00Z"
  annotations: {sluice.dev/retries: "2"}
spec:
  tls: [{hosts: [a.example.com], secretName: tls}]
  rules:
  - host: a.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
stringData: {tls.crt: "x", tls.key: "k"}
`)
	a, b := decode("a.yaml", data), decode("a.yaml", data)
	if len(a.objects) != 3 || len(a.invalid) > 0 {
		t.Fatalf("decoded %d objects, invalid %v; want 3 and none", len(a.objects), a.invalid)
	}
	for i := range a.objects {
		if !reflect.DeepEqual(a.objects[i], b.objects[i]) {
			t.Errorf("object %d differs between two decodes:\n%#v\n%#v", i, a.objects[i], b.objects[i])
		}
	}
}
