package corpus

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/translate"
)

func TestAllTranslates(t *testing.T) {
	o := Options{Ingresses: 25, Services: 4, BackendPort: 8080}
	in, err := All(o)
	if err != nil {
		t.Fatal(err)
	}
	cfg, problems := translate.Build(in, translate.Options{AllowLoopbackEndpoints: true})
	if len(problems) > 0 {
		t.Fatalf("problems: %+v", problems)
	}
	tbl := route.New(cfg)
	routes := 0
	for _, vh := range cfg.VirtualHosts {
		routes += len(vh.Routes)
	}
	if routes != 2*25+1 {
		t.Errorf("routes = %d, want %d", routes, 2*25+1)
	}
	for _, host := range []string{BenchHost, IngressHost(0), IngressHost(24)} {
		r := tbl.Match(host, "/api/x")
		if r == nil || r.Backend == nil || len(r.Backend.Endpoints) != 1 || r.Backend.Endpoints[0].Address != "127.0.0.1:8080" {
			t.Errorf("Match(%s) = %+v", host, r)
		}
	}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{Ingresses: 250, BackendPort: 8080}
	if err := WriteDir(dir, o); err != nil {
		t.Fatal(err)
	}
	if err := WriteIngressFile(dir, o, 0, map[int]string{0: "new.bench.local"}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 4 { // base + 3 ingress files
		t.Fatalf("files = %v", files)
	}
	data, err := os.ReadFile(filepath.Join(dir, IngressFile(o, 0)))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "---\n")[1:]
	if len(docs) != 100 {
		t.Fatalf("%d documents in the first file, want 100", len(docs))
	}
	var ing networkingv1.Ingress
	if err := yaml.Unmarshal([]byte(docs[0]), &ing); err != nil {
		t.Fatal(err)
	}
	if ing.Spec.Rules[0].Host != "new.bench.local" || ing.Namespace != Namespace || ing.Kind != "Ingress" {
		t.Errorf("first Ingress = %s %s/%s host %s", ing.Kind, ing.Namespace, ing.Name, ing.Spec.Rules[0].Host)
	}
}

func TestAllTLSTranslates(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Ingresses: 5, Services: 2, BackendPort: 8080, TLS: ca}
	in, err := All(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Secrets) != 5 {
		t.Fatalf("%d Secrets, want 5", len(in.Secrets))
	}
	cfg, problems := translate.Build(in, translate.Options{AllowLoopbackEndpoints: true})
	if len(problems) > 0 {
		t.Fatalf("problems: %+v", problems)
	}
	tbl := route.New(cfg)
	for i := range 5 {
		c := tbl.Certificate(IngressHost(i))
		if c == nil || c.Leaf == nil {
			t.Fatalf("no certificate for %s", IngressHost(i))
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: IngressHost(i), Roots: ca.Pool()}); err != nil {
			t.Errorf("certificate for %s: %v", IngressHost(i), err)
		}
		if i > 0 && c == tbl.Certificate(IngressHost(i-1)) {
			t.Errorf("%s and %s share a certificate", IngressHost(i), IngressHost(i-1))
		}
	}
}
