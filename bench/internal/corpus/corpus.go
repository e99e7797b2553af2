// Package corpus generates the Kubernetes objects the benchmarks feed sluice:
// one IngressClass, a few Services with EndpointSlices pointing at the bench
// backend on loopback, one Ingress for host bench.local (the data-plane
// benchmarks) and N generated Ingresses with two Prefix paths each (the
// control-plane benchmarks: 10,000 Ingresses ≈ 20,000 routes), optionally
// each with its own TLS Secret (ECDSA P-256 leaf signed by one CA).
//
// Data flow: corpus → translate.Input (in-process benchmark, bench/translate)
// or → YAML files in a directory → `sluice proxy --manifests DIR`
// (bench/ctlplane, scripts/bench.sh).
package corpus

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/translate"
)

// Namespace holds every generated object.
const Namespace = "bench"

// BenchHost is the host of the single Ingress the data-plane benchmarks use.
const BenchHost = "bench.local"

// Options say what to generate.
type Options struct {
	// Ingresses is the number of generated Ingresses (besides the bench.local
	// one); each has host ing-NNNNN.bench.local and paths "/" and "/api".
	Ingresses int
	// Services spread the Ingresses over this many Services; default 100.
	Services int
	// BackendIP and BackendPort are the one endpoint every Service has.
	BackendIP   string
	BackendPort int32
	// PerFile is the number of generated Ingresses per YAML file; default 100.
	PerFile int
	// TLS, when set, gives every generated Ingress a spec.tls entry for its
	// host and its own kubernetes.io/tls Secret (SecretName), signed by this
	// CA; nil means plain HTTP Ingresses.
	TLS *CA
}

func (o *Options) defaults() {
	if o.Services <= 0 {
		o.Services = 100
	}
	if o.PerFile <= 0 {
		o.PerFile = 100
	}
	if o.BackendIP == "" {
		o.BackendIP = "127.0.0.1"
	}
}

// IngressHost returns the host of generated Ingress i.
func IngressHost(i int) string { return fmt.Sprintf("ing-%05d.bench.local", i) }

// Base returns the IngressClass, Services, EndpointSlices and the bench.local
// Ingress.
func Base(o Options) translate.Input {
	o.defaults()
	yes := true
	in := translate.Input{
		IngressClasses: []*networkingv1.IngressClass{{
			TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
			ObjectMeta: metav1.ObjectMeta{
				Name:        "sluice",
				Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"},
			},
			Spec: networkingv1.IngressClassSpec{Controller: translate.ControllerName},
		}},
	}
	for s := 0; s < o.Services; s++ {
		name := serviceName(s)
		in.Services = append(in.Services, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{
					Name: "http", Port: 80, Protocol: corev1.ProtocolTCP,
					TargetPort: intstr.FromInt32(o.BackendPort),
				}},
			},
		})
		portName, proto, port := "http", corev1.ProtocolTCP, o.BackendPort
		in.EndpointSlices = append(in.EndpointSlices, &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name + "-abcde", Namespace: Namespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: name},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{o.BackendIP},
				Conditions: discoveryv1.EndpointConditions{Ready: &yes},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: Namespace, Name: name + "-0"},
			}},
		})
	}
	in.Ingresses = append(in.Ingresses, ingress("bench", BenchHost, serviceName(0), "/"))
	return in
}

// Ingress returns generated Ingress i with the given host.
func Ingress(o Options, i int, host string) *networkingv1.Ingress {
	o.defaults()
	ing := ingress(fmt.Sprintf("ing-%05d", i), host, serviceName(i%o.Services), "/", "/api")
	if o.TLS != nil {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: SecretName(i)}}
	}
	return ing
}

// All returns Base plus the generated Ingresses (and their Secrets, with
// o.TLS).
func All(o Options) (translate.Input, error) {
	in := Base(o)
	for i := 0; i < o.Ingresses; i++ {
		in.Ingresses = append(in.Ingresses, Ingress(o, i, IngressHost(i)))
		if o.TLS != nil {
			s, err := Secret(o, i)
			if err != nil {
				return in, err
			}
			in.Secrets = append(in.Secrets, s)
		}
	}
	return in, nil
}

// SecretFile is the file holding generated Ingress i's Secret.
func SecretFile(o Options, i int) string {
	o.defaults()
	return fmt.Sprintf("secrets-%03d.yaml", i/o.PerFile)
}

// IngressFile is the file holding generated Ingress i.
func IngressFile(o Options, i int) string {
	o.defaults()
	return fmt.Sprintf("ingresses-%03d.yaml", i/o.PerFile)
}

// WriteDir writes base.yaml and the Ingress files (and, with o.TLS, the
// Secret files) into dir.
func WriteDir(dir string, o Options) error {
	o.defaults()
	base := Base(o)
	var objs []any
	for _, c := range base.IngressClasses {
		objs = append(objs, c)
	}
	for _, s := range base.Services {
		objs = append(objs, s)
	}
	for _, s := range base.EndpointSlices {
		objs = append(objs, s)
	}
	for _, ing := range base.Ingresses {
		objs = append(objs, ing)
	}
	if err := writeYAML(filepath.Join(dir, "base.yaml"), objs); err != nil {
		return err
	}
	for start := 0; start < o.Ingresses; start += o.PerFile {
		if err := WriteIngressFile(dir, o, start, nil); err != nil {
			return err
		}
		if o.TLS == nil {
			continue
		}
		var secrets []any
		for i := start; i < start+o.PerFile && i < o.Ingresses; i++ {
			s, err := Secret(o, i)
			if err != nil {
				return err
			}
			secrets = append(secrets, s)
		}
		if err := writeYAML(filepath.Join(dir, SecretFile(o, start)), secrets); err != nil {
			return err
		}
	}
	return nil
}

// WriteIngressFile (re)writes the file holding Ingress first (a multiple of
// PerFile). hosts overrides the host of some Ingresses by index. The file is
// written next to dir and renamed into it, so a watcher never reads half a
// file.
func WriteIngressFile(dir string, o Options, first int, hosts map[int]string) error {
	o.defaults()
	var objs []any
	for i := first; i < first+o.PerFile && i < o.Ingresses; i++ {
		host, ok := hosts[i]
		if !ok {
			host = IngressHost(i)
		}
		objs = append(objs, Ingress(o, i, host))
	}
	return writeYAML(filepath.Join(dir, IngressFile(o, first)), objs)
}

func writeYAML(path string, objs []any) error {
	var b bytes.Buffer
	for _, obj := range objs {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", path, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	return nil
}

func serviceName(s int) string { return fmt.Sprintf("svc-%03d", s) }

func ingress(name, host, service string, paths ...string) *networkingv1.Ingress {
	class := "sluice"
	prefix := networkingv1.PathTypePrefix
	var hp []networkingv1.HTTPIngressPath
	for _, p := range paths {
		hp = append(hp, networkingv1.HTTPIngressPath{
			Path: p, PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: service, Port: networkingv1.ServiceBackendPort{Name: "http"},
			}},
		})
	}
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host:             host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: hp}},
			}},
		},
	}
}
