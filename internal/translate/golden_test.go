package translate

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/golden"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/testcert"
)

var update = flag.Bool("update", false, "rewrite testdata/*/golden.txt")

// TestGolden builds every testdata/<case>/input.yaml and compares the dump,
// the problems and the answers to testdata/<case>/requests.txt (if any) with
// testdata/<case>/golden.txt.
func TestGolden(t *testing.T) {
	golden.Run(t, "testdata/*/input.yaml", *update, func(t *testing.T, c golden.Case) string {
		dir := filepath.Dir(c.Input)
		input, opts := loadCase(t, dir)
		cfg, problems := Build(input, opts)
		checkInvariants(t, &cfg)
		return render(t, dir, &cfg, problems)
	})
}

// render is the golden text: route.Dump, the problems, and the route and
// certificate chosen for each line of requests.txt ("http HOST PATH" with
// HOST "-" for none, "req METHOD HOST TARGET [Name:value ...]", "sni NAME", or "tls SNI HOST" (SNI "-" for none): whether a request for
// HOST on a connection with server name SNI is refused with 421); a line
// may start with "at ADDR" or "at ADDR:PORT", the load-balancer address
// (port 80 if none) the request reached.
func render(t *testing.T, dir string, cfg *route.Config, problems []Problem) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(route.Dump(cfg))
	b.WriteString("problems:\n")
	for _, p := range problems {
		fmt.Fprintf(&b, "  %s %s/%s %s: %s\n", p.Kind, p.Namespace, p.Name, p.Reason, p.Message)
	}
	reqs, err := os.ReadFile(filepath.Join(dir, "requests.txt"))
	if os.IsNotExist(err) {
		return b.String()
	} else if err != nil {
		t.Fatal(err)
	}
	tbl := route.New(*cfg)
	sources := map[*tls.Certificate]string{}
	for _, c := range cfg.Certificates {
		sources[c.Cert] = c.Source
	}
	if cfg.DefaultCertificate != nil {
		sources[cfg.DefaultCertificate.Cert] = "default " + cfg.DefaultCertificate.Source
	}
	for _, s := range cfg.Scopes {
		for _, c := range s.Config.Certificates {
			sources[c.Cert] = c.Source
		}
		if d := s.Config.DefaultCertificate; d != nil && sources[d.Cert] == "" {
			sources[d.Cert] = "default " + d.Source
		}
	}
	all := tbl
	b.WriteString("requests:\n")
	sc := bufio.NewScanner(bytes.NewReader(reqs))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// "at ADDR <request>": the request reached load-balancer address
		// ADDR (route.Scope).
		tbl = all
		if len(f) > 2 && f[0] == "at" {
			ap, err := netip.ParseAddrPort(f[1])
			if err != nil {
				ap = netip.AddrPortFrom(netip.MustParseAddr(f[1]), 80)
			}
			tbl = all.For(ap)
			fmt.Fprintf(&b, "  at %s:\n", f[1])
			f = f[2:]
		}
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
			continue
		case f[0] == "http" && len(f) == 3:
			host := f[1]
			if host == "-" {
				host = ""
			}
			r := tbl.Match(host, f[2])
			if r == nil {
				fmt.Fprintf(&b, "  http %s %s -> 404\n", f[1], f[2])
			} else {
				fmt.Fprintf(&b, "  http %s %s -> %s (ingress %s)\n", f[1], f[2], r.Backend.Name, r.Ingress)
			}
		case f[0] == "req" && len(f) >= 4:
			// "req METHOD HOST TARGET [Name:value ...]": with the request's
			// method, header and query (route.Conditions).
			fmt.Fprintf(&b, "  %s -> %s\n", strings.Join(f, " "), matchRequest(tbl, f[1], f[2], f[3], f[4:]))
		case f[0] == "sni" && len(f) == 2:
			src := "none"
			if c := tbl.Certificate(f[1]); c != nil {
				src = sources[c]
			}
			fmt.Fprintf(&b, "  sni %s -> %s\n", f[1], src)
		case f[0] == "tls" && len(f) == 3:
			verdict, sni := "served", f[1]
			if sni == "-" {
				sni = ""
			}
			if tbl.Misdirected(sni, f[2]) {
				verdict = "421"
			}
			fmt.Fprintf(&b, "  tls sni=%s host %s -> %s\n", f[1], f[2], verdict)
		default:
			t.Fatalf("requests.txt: bad line %q", sc.Text())
		}
	}
	return b.String()
}

// loadCase decodes dir/input.yaml: multi-document YAML of Ingress,
// IngressClass, Service, EndpointSlice and Secret objects, plus an optional
// document of kind BuildOptions with the Options fields. Secret stringData is
// merged into data, with "{{cert}}" and "{{key}}" replaced by a test key
// pair.
func loadCase(t testing.TB, dir string) (Input, Options) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in, opts, err := decodeObjects(data)
	if err != nil {
		t.Fatalf("decoding %s/input.yaml: %v", dir, err)
	}
	return in, opts
}

func decodeObjects(data []byte) (Input, Options, error) {
	var in Input
	var opts Options
	err := golden.Documents(data, func(kind string, doc []byte) error {
		switch kind {
		case "Ingress":
			return golden.Append(&in.Ingresses, doc)
		case "IngressClass":
			return golden.Append(&in.IngressClasses, doc)
		case "Service":
			return golden.Append(&in.Services, doc)
		case "EndpointSlice":
			return golden.Append(&in.EndpointSlices, doc)
		case "Pod": // into Input.Pods: with any Pod, the endpoint checks compare addresses
			o := &corev1.Pod{}
			err := yaml.UnmarshalStrict(doc, o)
			pods, _ := in.Pods.(PodMap)
			if pods == nil {
				pods = PodMap{}
				in.Pods = pods
			}
			var ips []string
			for _, ip := range o.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
			pods[o.Namespace+"/"+o.Name] = ips
			return err
		case "Secret":
			err := golden.Append(&in.Secrets, doc)
			mergeStringData(in.Secrets[len(in.Secrets)-1])
			return err
		case "BuildOptions":
			var o struct {
				Kind                     string   `json:"kind"`
				IngressClass             string   `json:"ingressClass"`
				IngressClasses           []string `json:"ingressClasses"`
				ControllerName           string   `json:"controllerName"`
				DefaultCertificate       string   `json:"defaultCertificate"`
				AllowEndpointsWithoutPod bool     `json:"allowEndpointsWithoutPod"`
				AllowLoopbackEndpoints   bool     `json:"allowLoopbackEndpoints"`
				HostOwnership            string   `json:"hostOwnership"`
				// DefaultBackendNamespaces: absent is nil (every namespace).
				DefaultBackendNamespaces []string `json:"defaultBackendNamespaces"`
				SSLRedirect              bool     `json:"sslRedirect"`
				IngressNginx             bool     `json:"ingressNginx"`
			}
			err := yaml.UnmarshalStrict(doc, &o)
			opts = Options{IngressClass: o.IngressClass, IngressClasses: o.IngressClasses, ControllerName: o.ControllerName,
				DefaultCertificate: o.DefaultCertificate, AllowEndpointsWithoutPod: o.AllowEndpointsWithoutPod,
				AllowLoopbackEndpoints: o.AllowLoopbackEndpoints,
				HostOwnership:          o.HostOwnership, DefaultBackendNamespaces: o.DefaultBackendNamespaces, SSLRedirect: o.SSLRedirect}
			if o.IngressNginx {
				opts.IngressNginx = &IngressNginx{}
			}
			return err
		}
		if known, err := decodeGatewayDoc(kind, doc, &in, &opts); known {
			return err
		}
		return fmt.Errorf("unknown kind %q", kind)
	})
	return in, opts, err
}

func mergeStringData(s *corev1.Secret) {
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	kp := testKeyPair()
	for k, v := range s.StringData {
		v = strings.ReplaceAll(v, "{{cert}}", kp.cert)
		v = strings.ReplaceAll(v, "{{key}}", kp.key)
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

type pemPair struct{ cert, key string }

// testKeyPair is a self-signed ECDSA certificate for the goldens' Secrets;
// the dump never shows its bytes, so a fresh one per run is fine.
var testKeyPair = sync.OnceValue(func() pemPair {
	cert, key := testcert.Static("sluice test", []string{"example.com", "*.example.com"}, time.Unix(0, 0).Add(100*365*24*time.Hour))
	return pemPair{cert: string(cert), key: string(key)}
})

// checkInvariants asserts what every Config from Build must satisfy.
func checkInvariants(t testing.TB, cfg *route.Config) {
	t.Helper()
	for i, vh := range cfg.VirtualHosts {
		if i > 0 && cfg.VirtualHosts[i-1].Host >= vh.Host {
			t.Errorf("virtual hosts not sorted/unique: %q then %q", cfg.VirtualHosts[i-1].Host, vh.Host)
		}
		if vh.Host != strings.ToLower(vh.Host) {
			t.Errorf("host %q not lower case", vh.Host)
		}
		if _, msg := checkHost(vh.Host); msg != "" {
			t.Errorf("host %q invalid: %s", vh.Host, msg)
		}
		if len(vh.Routes) == 0 {
			t.Errorf("host %q has no routes", vh.Host)
		}
		seen := map[string]bool{}
		for j, r := range vh.Routes {
			if r.PathType == route.PathRegex { // HTTPRoute's may begin otherwise: "(?:/a|/b)$"
				if _, err := route.CompilePath(r.Path); err != nil {
					t.Errorf("host %q: regex path %q does not compile: %v", vh.Host, r.Path, err)
				}
			} else if !strings.HasPrefix(r.Path, "/") {
				t.Errorf("host %q: path %q not absolute", vh.Host, r.Path)
			}
			if r.Backend == nil || r.Backend.Name == "" {
				t.Errorf("host %q path %q: no backend", vh.Host, r.Path)
			}
			if r.Ingress == "" {
				t.Errorf("host %q path %q: no ingress", vh.Host, r.Path)
			}
			k := matchKey(r.PathType, r.Path) + conditionsLabel(r.Conditions)
			if seen[k] {
				t.Errorf("host %q: duplicate route %s %q", vh.Host, r.PathType, r.Path)
			}
			seen[k] = true
			if j > 0 {
				p := vh.Routes[j-1]
				// Routes of one path differ in their conditions; the one
				// without comes last.
				if p.PathType > r.PathType || p.PathType == r.PathType && (p.Path > r.Path || p.Path == r.Path && p.Conditions == nil) {
					t.Errorf("host %q: routes not sorted: %s %q then %s %q", vh.Host, p.PathType, p.Path, r.PathType, r.Path)
				}
			}
			if r.Backend != nil {
				checkBackend(t, r.Backend)
			}
		}
	}
	if cfg.DefaultBackend != nil {
		checkBackend(t, cfg.DefaultBackend)
	}
	for _, c := range cfg.Certificates {
		if c.Cert == nil || c.Cert.Leaf == nil || len(c.Hosts) == 0 || c.Source == "" {
			t.Errorf("bad certificate from %q", c.Source)
		}
	}
	if c := cfg.DefaultCertificate; c != nil && (c.Cert == nil || c.Cert.Leaf == nil) {
		t.Errorf("bad default certificate from %q", c.Source)
	}
}

func checkBackend(t testing.TB, be *route.Backend) {
	t.Helper()
	if !strings.HasPrefix(be.Name, be.Namespace+"/"+be.Service+":"+be.Port) {
		t.Errorf("backend name %q does not name %s/%s:%s", be.Name, be.Namespace, be.Service, be.Port)
	}
	for i, ep := range be.Endpoints {
		if i > 0 && be.Endpoints[i-1].Address >= ep.Address {
			t.Errorf("backend %s: endpoints not sorted/unique", be.Name)
		}
	}
	p := be.Policy
	if p.Retries < -1 || p.Retries > MaxRetries || p.ConnectTimeout < 0 || p.ConnectTimeout > MaxTimeout ||
		p.ResponseTimeout < 0 || p.ResponseTimeout > MaxTimeout || (p.Algorithm == route.HeaderHash) != (p.HashHeader != "") {
		t.Errorf("backend %s: bad policy %+v", be.Name, p)
	}
}

func matchRequest(tbl *route.Table, method, host, target string, header []string) string {
	req := httptest.NewRequest(method, target, nil)
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Add(k, v)
	}
	r := tbl.Match(host, req.URL.Path)
	if r != nil && r.Conditions != nil {
		r = tbl.MatchRequest(host, req.URL.Path, req)
	}
	if r == nil {
		return "404"
	}
	return fmt.Sprintf("%s (ingress %s)", r.Backend.Name, r.Ingress)
}
