//go:build e2e && conformance

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	confconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"

	ct "sluice.dev/sluice/internal/controller/controllertest"
)

// conformanceIP is the loopback address the Gateways get (the binding
// publishes it) and HAProxy listens on, ports 80 and 443, so that the
// suite's requests to status.addresses reach the proxies as a client's
// would: through the load balancer, on the listener's own port.
const conformanceIP = "127.26.0.1"

// conformanceGatewayIPs are the addresses Gateways hold one each (the
// binding's spec.gatewayAddresses: 127.26.0.2 to 127.26.0.41): HAProxy
// listens on them too and tells the proxies, in a PROXY protocol v2
// header, which address a connection reached, so each Gateway is served
// from its own routing table.
var conformanceGatewayIPs = func() []string {
	var out []string
	for i := 2; i <= 41; i++ {
		out = append(out, fmt.Sprintf("127.26.0.%d", i))
	}
	return out
}()

// The HAProxy backends of conformanceIP's frontends, in TCP mode: port 80
// carries HTTP/1.1 and h2c (gRPC) to the proxies' plain port, port 443
// TLS to their HTTPS port, both untouched by HAProxy.
const (
	confPlain = "conf-plain"
	confTLS   = "conf-tls"
)

// The extra listener ports (GatewayPort8080, HTTPRouteParentRefPort):
// HAProxy listens on them on every address and forwards them like 80 and
// 443, the PROXY header telling the proxies which port was reached.
const (
	confExtraHTTP  = "8000-8099"
	confExtraHTTPS = "8443"
)

// ipAddressType is the address type of the suite's static addresses.
var ipAddressType = gatewayv1.IPAddressType

// sluiceBase names the suite's base manifests with POD_IP added.
const sluiceBase = "sluice/base-manifests.yaml"

// conformanceFeatures are the features sluice claims: the core features
// of the GATEWAY-HTTP and GATEWAY-GRPC profiles and the extended ones it
// passes.
var conformanceFeatures = []features.FeatureName{
	features.SupportBackendTLSPolicy,
	features.SupportBackendTLSPolicySANValidation,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportGatewayStaticAddresses,
	features.SupportGatewayPort8080,
	features.SupportHTTPRouteParentRefPort,
	features.SupportGateway,
	features.SupportHTTPRoute,
	features.SupportReferenceGrant,
	features.SupportGRPCRoute,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteBackendProtocolH2C,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
}

// TestConformance runs the official Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, the version of the API types) for
// the profiles GATEWAY-HTTP and GATEWAY-GRPC against sluice installed with
// `helm install` (gatewayAPI.enabled, the chart's Gateway API CRDs), HAProxy
// in front on conformanceIP, and writes the ConformanceReport to
// $SLUICE_CONFORMANCE_REPORT (default conformance/report.yaml of the
// repository). It prints one line per profile:
// `e2e conformance-<profile>: core=<result> passed=N failed=F skipped=S`.
//
// SLUICE_CONFORMANCE_RUN_TEST runs one test of the suite by its short name.
func TestConformance(t *testing.T) {
	start := time.Now()
	conformanceAddressFree(t)
	h := installChart(t, "gwc", chartOptions{
		setup: func(e *env) string {
			installConformanceCRDs(e)
			// HAProxy reaches the proxies from the cluster bridge: only
			// its PROXY protocol headers are trusted.
			return fmt.Sprintf("proxy: {extraArgs: [--h2c, --proxy-protocol, --trusted-proxies=%s/32]}\n", e.c.BridgeIP()) +
				fmt.Sprintf("gatewayAPI: {extraHTTPPorts: %q, extraHTTPSPorts: %q}\n", confExtraHTTP, confExtraHTTPS)
		},
		haproxy: func(e *env) { e.lbBack += conformanceFrontends() },
		base:    conformanceValues,
		values:  "gatewayAPI: {enabled: true, binding: haproxy}\n",
	})
	e := h.env
	e.settled(proxyNS, proxyName, 4*time.Minute)
	t.Logf("cluster and sluice ready after %s", time.Since(start).Round(time.Second))

	s := ct.Scheme()
	for _, add := range []func(*runtime.Scheme) error{gatewayv1.Install, v1beta1.Install, v1alpha2.Install, v1alpha3.Install, xv1alpha1.Install, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(e.c.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(e.c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	base, err := fs.ReadFile(conformance.Manifests, "base/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withIP, err := withPodIP(base)
	if err != nil {
		t.Fatal(err)
	}
	report := os.Getenv("SLUICE_CONFORMANCE_REPORT")
	if report == "" {
		report = filepath.Join(e.root, "conformance/report.yaml")
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     "sluice",
			CleanupBaseResources: true,
			CleanupTestResources: true,
			SupportedFeatures:    conformanceFeatures,
			TimeoutConfig:        confconfig.DefaultTimeoutConfig(),
			Mode:                 "default",
			RunTest:              os.Getenv("SLUICE_CONFORMANCE_RUN_TEST"),
			// GatewayStaticAddresses: a Gateway's spec.addresses may ask
			// for one of the binding's gatewayAddresses (the last, which
			// no other Gateway of the run takes first); an address outside
			// them is not usable.
			UsableNetworkAddresses:   []gatewayv1.GatewaySpecAddress{{Type: &ipAddressType, Value: conformanceGatewayIPs[len(conformanceGatewayIPs)-1]}},
			UnusableNetworkAddresses: []gatewayv1.GatewaySpecAddress{{Type: &ipAddressType, Value: "127.26.1.1"}},
			ConformanceProfiles: []suite.ConformanceProfileName{
				suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName},
			Implementation: confv1.Implementation{
				Organization: "sluice-dev",
				Project:      "sluice",
				URL:          "https://github.com/sluice-dev/sluice",
				Version:      implementationVersion(e.root),
				Contact:      []string{"https://github.com/sluice-dev/sluice/issues"},
			},
		},
		Client:        cl,
		ClientOptions: client.Options{Scheme: s}, // the client of each test
		Clientset:     cs,
		RestConfig:    e.c.RESTConfig(),
		// The suite's base manifests with POD_IP added to the echo pods
		// (their processes share their node's network namespace and listen
		// on their own address), under a name of their own: the suite
		// concatenates a path found in several of these file systems.
		ManifestFS:    []fs.FS{fstest.MapFS{sluiceBase: {Data: withIP}}, &conformance.Manifests},
		BaseManifests: sluiceBase,
	}
	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatalf("creating the conformance suite: %v", err)
	}
	// The suite's parallel tests end after this function returns: the
	// report is made once every test ended.
	t.Cleanup(func() { writeConformanceReport(t, cSuite, report, start) })
	cSuite.Setup(t, tests.ConformanceTests)
	runErr := cSuite.Run(t, tests.ConformanceTests)
	if runErr != nil {
		t.Errorf("running the conformance suite: %v", runErr)
	}
}

// conformanceAddressFree fails the test when something listens on
// conformanceIP's ports already (a HAProxy an interrupted run left behind,
// say): HAProxy binds with SO_REUSEPORT, so it would share the
// connections with the stray listener rather than fail.
func conformanceAddressFree(t *testing.T) {
	t.Helper()
	for _, ip := range append([]string{conformanceIP}, conformanceGatewayIPs...) {
		for _, port := range []string{"80", "443"} {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				t.Fatalf("%s:%s is taken (a process an interrupted run left behind? see ss -ltnp): %v", ip, port, err)
			}
			l.Close()
		}
	}
}

// writeConformanceReport writes the suite's report to path and prints one
// summary line per profile.
func writeConformanceReport(t *testing.T, cSuite *suite.ConformanceTestSuite, path string, start time.Time) {
	r, err := cSuite.Report()
	if err != nil {
		t.Errorf("making the conformance report: %v", err)
		return
	}
	out, err := yaml.Marshal(r)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, out, 0o644)
	}
	if err != nil {
		t.Errorf("writing the conformance report: %v", err)
		return
	}
	var lines []string
	for _, p := range r.ProfileReports {
		ext := "none"
		if e := p.Extended; e != nil {
			ext = fmt.Sprintf("%s passed=%d failed=%d skipped=%d", e.Result, e.Passed, e.Failed, e.Skipped)
		}
		lines = append(lines, fmt.Sprintf("e2e conformance-%s: core=%s passed=%d failed=%d skipped=%d failed_tests=%s extended=%s took=%s",
			strings.ToLower(p.Name), p.Core.Result, p.Core.Passed, p.Core.Failed, p.Core.Skipped,
			strings.Join(p.Core.FailedTests, ","), ext, time.Since(start).Round(time.Second)))
	}
	for _, l := range lines {
		t.Log(l)
	}
	writeSummary(lines)
	t.Logf("conformance report written to %s", path)
}

// conformanceValues are the chart values of TestConformance: those of
// TestHelm, with the controller reading TLS Secrets (a listener whose
// certificateRef names no Secret must say ResolvedRefs=False), the
// binding on HAProxy's TCP backend of conformanceIP:80 (publishing
// conformanceIP, which the Gateways get as their address), a second one
// for the HTTPS port, and the proxies serving h2c (GRPCRoute) on their
// plain port.
func conformanceValues(runtimeAPI string) string {
	return fmt.Sprintf(`image: {repository: ghcr.io/sluice-dev/sluice, tag: e2e}
listenOnPodIP: true
controller:
  logFormat: text
  logLevel: debug
  readTLSSecrets: true
proxy:
  replicas: 2
  drainMaxWaitSeconds: 30
  shutdownTimeoutSeconds: 10
  terminationMarginSeconds: 20
  logFormat: text
  extraArgs: [--h2c]
bindings:
  - name: haproxy
    provider:
      haproxy: {runtimeAPI: %[1]q, backend: %[2]s, proxyProtocol: true}
    drain: {handshake: true}
    publish: [{ip: %[4]s}]
    gatewayAddresses: [%[5]s]
  - name: haproxy-tls
    port: https
    provider:
      haproxy: {runtimeAPI: %[1]q, backend: %[3]s, proxyProtocol: true}
    readinessGate: false
    drain: {handshake: false}
`, runtimeAPI, confPlain, confTLS, conformanceIP, strings.Join(conformanceGatewayIPs, ", "))
}

// conformanceFrontends are HAProxy's frontends on conformanceIP (added
// after the main backend's lines) and their TCP-mode backends, which the
// bindings fill.
func conformanceFrontends() string {
	binds := func(port, extra string) string {
		var b strings.Builder
		for _, ip := range conformanceGatewayIPs {
			fmt.Fprintf(&b, "    bind %s:%s\n", ip, port)
		}
		for _, ip := range append([]string{conformanceIP}, conformanceGatewayIPs...) {
			fmt.Fprintf(&b, "    bind %s:%s\n", ip, extra)
		}
		return b.String()
	}
	return fmt.Sprintf(`
frontend conf-http
    mode tcp
    bind %[1]s:80
%[4]s    default_backend %[2]s
backend %[2]s
    mode tcp
    balance roundrobin
    option httpchk GET /healthz
frontend conf-https
    mode tcp
    bind %[1]s:443
%[5]s    default_backend %[3]s
backend %[3]s
    mode tcp
    balance roundrobin
`, conformanceIP, confPlain, confTLS, binds("80", confExtraHTTP), binds("443", confExtraHTTPS))
}

// withPodIP adds POD_IP (status.podIP) to the environment of every
// echo-basic container of the manifests.
func withPodIP(manifests []byte) ([]byte, error) {
	var out [][]byte
	for _, doc := range bytes.Split(manifests, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("decoding the base manifests: %w", err)
		}
		if obj == nil {
			continue
		}
		u := unstructured.Unstructured{Object: obj}
		containers, found, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if err != nil || !found || u.GetKind() != "Deployment" {
			out = append(out, doc)
			continue
		}
		for i, c := range containers {
			cm, ok := c.(map[string]any)
			if !ok || !strings.Contains(fmt.Sprint(cm["image"]), "/echo-basic:") {
				continue
			}
			env, _ := cm["env"].([]any)
			cm["env"] = append(env, map[string]any{"name": "POD_IP",
				"valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "status.podIP"}}})
			containers[i] = cm
		}
		if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return bytes.Join(out, []byte("\n---\n")), nil
}

// installConformanceCRDs applies the chart's gateway-api/*.yaml and, for
// a standard-channel kind the chart does not ship (GRPCRoute, until it
// does), the file of the same module version, then waits until the API
// server serves them.
func installConformanceCRDs(e *env) {
	e.t.Helper()
	files, err := filepath.Glob(filepath.Join(e.root, "deploy/helm/sluice/gateway-api/*.yaml"))
	if err != nil || len(files) == 0 {
		e.t.Fatalf("gateway-api CRDs: %v %v", files, err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[filepath.Base(f)] = true
	}
	const grpc = "gateway.networking.k8s.io_grpcroutes.yaml"
	if !have[grpc] {
		dir := moduleDir(e, "sigs.k8s.io/gateway-api")
		files = append(files, filepath.Join(dir, "config/crd/standard", grpc))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&u.Object); err != nil {
			e.t.Fatalf("decoding %s: %v", f, err)
		}
		if err := e.cl.Create(context.Background(), u); err != nil {
			e.t.Fatalf("creating %s: %v", f, err)
		}
	}
	e.eventually(time.Minute, "the Gateway API CRDs served", func(ctx context.Context) (bool, error) {
		return e.cl.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRouteList"}}) == nil, nil
	})
}

// moduleDir is the directory of a module of the build (its source in the
// module cache).
func moduleDir(e *env, mod string) string {
	e.t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = e.root
	out, err := cmd.Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		e.t.Fatalf("finding module %s: %v", mod, err)
	}
	return string(bytes.TrimSpace(out))
}

// implementationVersion is the git description of the tree tested.
func implementationVersion(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "dev"
	}
	return strings.TrimSpace(string(out))
}
