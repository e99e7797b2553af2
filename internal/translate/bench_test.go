package translate

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchInput is n Ingresses in 100 namespaces, each with its own host, two
// paths, a Service and an EndpointSlice of three ready pods.
func benchInput(n int) Input {
	var in Input
	class := DefaultIngressClass
	prefix, exact := networkingv1.PathTypePrefix, networkingv1.PathTypeExact
	port, name := int32(8080), "http"
	for i := range n {
		ns, svc := fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("svc-%d", i)
		backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80},
		}}
		in.Ingresses = append(in.Ingresses, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ing-%d", i), CreationTimestamp: metav1.Unix(int64(i), 0)},
			Spec: networkingv1.IngressSpec{
				IngressClassName: &class,
				Rules: []networkingv1.IngressRule{{
					Host: fmt.Sprintf("app-%d.example.com", i),
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{
							{Path: "/", PathType: &prefix, Backend: backend},
							{Path: "/healthz", PathType: &exact, Backend: backend},
						},
					}},
				}},
			},
		})
		in.Services = append(in.Services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: name, Port: 80}}},
		})
		var eps []discoveryv1.Endpoint
		for j := range 3 {
			eps = append(eps, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>8&0xff, i&0xff, j+1)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", svc, j)}})
		}
		in.EndpointSlices = append(in.EndpointSlices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
			Endpoints:   eps,
		})
	}
	return in
}

// BenchmarkBuild10k builds 10,000 Ingresses (20,000 routes, 10,000 Services
// and EndpointSlices, 30,000 endpoints).
func BenchmarkBuild10k(b *testing.B) {
	in := benchInput(10000)
	cfg, problems := Build(in, Options{})
	routes := 0
	for _, vh := range cfg.VirtualHosts {
		routes += len(vh.Routes)
	}
	if routes != 20000 || len(problems) != 0 {
		b.Fatalf("got %d routes and %d problems; want 20000 and 0", routes, len(problems))
	}
	b.ReportAllocs()
	for b.Loop() {
		Build(in, Options{})
	}
	b.ReportMetric(float64(routes), "routes/op")
}

// BenchmarkUpdate10k changes the host of one of 10,000 Ingresses per
// operation and translates incrementally (translate.Update), as the proxy's
// rebuild loop does after a change.
func BenchmarkUpdate10k(b *testing.B) {
	in := benchInput(10000)
	res := Translate(in, Options{}, nil)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		ing := in.Ingresses[i%len(in.Ingresses)].DeepCopy()
		ing.Spec.Rules[0].Host = fmt.Sprintf("changed-%d.example.com", i)
		in.Ingresses = append([]*networkingv1.Ingress(nil), in.Ingresses...)
		in.Ingresses[i%len(in.Ingresses)] = ing
		res = Update(res, in, Options{}, nil)
		if res.Full || res.Retranslated != 1 {
			b.Fatalf("translation full=%t of %d Ingresses; want incremental of 1", res.Full, res.Retranslated)
		}
		i++
	}
}
