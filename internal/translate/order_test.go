package translate

import (
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

// TestOrderIndependent shuffles every golden input (objects, and endpoints
// within slices) and checks that the dump and problems never change.
func TestOrderIndependent(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/*/input.yaml")
	for _, in := range dirs {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			input, opts := loadCase(t, dir)
			want := dumpAll(Build(input, opts))
			rng := rand.New(rand.NewPCG(1, uint64(len(dir))))
			for i := range 20 {
				shuffleInput(rng, &input)
				if got := dumpAll(Build(input, opts)); got != want {
					t.Fatalf("shuffle %d changed the output:\n--- got\n%s\n--- want\n%s", i, got, want)
				}
			}
		})
	}
}

func dumpAll(cfg route.Config, problems []Problem) string {
	s := route.Dump(&cfg) + "problems:\n"
	for _, p := range problems {
		s += p.Kind + " " + p.Namespace + "/" + p.Name + " " + p.Reason + ": " + p.Message + "\n"
	}
	return s
}

func shuffleInput(rng *rand.Rand, in *Input) {
	shuffle(rng, in.Ingresses)
	shuffle(rng, in.IngressClasses)
	shuffle(rng, in.Services)
	shuffle(rng, in.EndpointSlices)
	shuffle(rng, in.Secrets)
	shuffleGateway(rng, &in.Gateway)
	for _, s := range in.EndpointSlices {
		shuffle(rng, s.Endpoints)
		shuffle(rng, s.Ports)
	}
}

func shuffle[T any](rng *rand.Rand, s []T) {
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
}

// TestBuildDoesNotModifyInput checks that Build leaves its input alone, so
// callers may pass informer cache objects.
func TestBuildDoesNotModifyInput(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/*/input.yaml")
	for _, in := range dirs {
		dir := filepath.Dir(in)
		input, opts := loadCase(t, dir)
		before := deepCopy(input)
		Build(input, opts)
		if !reflect.DeepEqual(before, input) {
			t.Errorf("%s: Build modified its input", dir)
		}
	}
}

func deepCopy(in Input) Input {
	var out Input
	for _, o := range in.Ingresses {
		out.Ingresses = append(out.Ingresses, o.DeepCopy())
	}
	for _, o := range in.IngressClasses {
		out.IngressClasses = append(out.IngressClasses, o.DeepCopy())
	}
	for _, o := range in.Services {
		out.Services = append(out.Services, o.DeepCopy())
	}
	for _, o := range in.EndpointSlices {
		out.EndpointSlices = append(out.EndpointSlices, o.DeepCopy())
	}
	for _, o := range in.Secrets {
		out.Secrets = append(out.Secrets, o.DeepCopy())
	}
	out.Gateway = deepCopyGateway(in.Gateway)
	if m, ok := in.Pods.(PodMap); ok {
		c := PodMap{}
		for k, v := range m {
			c[k] = slices.Clone(v)
		}
		out.Pods = c
	}
	return out
}

// TestNilObjects checks that nil entries in the input are skipped.
func TestNilObjects(t *testing.T) {
	cfg, problems := Build(Input{
		Ingresses:      []*networkingv1.Ingress{nil},
		IngressClasses: []*networkingv1.IngressClass{nil},
		Services:       []*corev1.Service{nil},
		EndpointSlices: []*discoveryv1.EndpointSlice{nil},
		Secrets:        []*corev1.Secret{nil},
	}, Options{})
	if len(cfg.VirtualHosts) != 0 || cfg.DefaultBackend != nil || len(problems) != 0 {
		t.Errorf("got %+v, %v; want an empty config", cfg, problems)
	}
}
