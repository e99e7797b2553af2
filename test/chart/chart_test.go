package chart

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	root  = "../.."
	chart = root + "/deploy/helm/sluice"
	// kubeVersion is what `helm template` assumes without a cluster
	// (topology spread's matchLabelKeys needs 1.27 or later).
	kubeVersion = "1.36.0"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the pinned helm binary, installing it the first time.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command(filepath.Join(root, "scripts/helm.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		helmPath, helmErr = strings.TrimSpace(string(out)), err
	})
	if helmErr != nil {
		t.Fatalf("installing helm (scripts/helm.sh): %v", helmErr)
	}
	return helmPath
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

func template(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, helm(t), append([]string{"template", "sluice", chart, "--namespace", "sluice-system", "--kube-version", kubeVersion}, args...)...)
}

func TestLint(t *testing.T) {
	examples, _ := filepath.Glob(filepath.Join(root, "deploy/helm/examples/values-*.yaml"))
	if len(examples) < 2 {
		t.Errorf("want the HAProxy and AWS values examples in deploy/helm/examples, found %v", examples)
	}
	for _, values := range append(valueSets(t), examples...) {
		if out, err := run(t, helm(t), "lint", "--strict", "--kube-version", kubeVersion, chart, "-f", values); err != nil {
			t.Errorf("helm lint -f %s: %v\n%s", values, err, out)
		}
	}
}

func valueSets(t *testing.T) []string {
	t.Helper()
	sets, err := filepath.Glob("testdata/*.values.yaml")
	if err != nil || len(sets) == 0 {
		t.Fatalf("no value sets: %v", err)
	}
	return sets
}

// TestTemplateGolden renders the main value sets (HAProxy, AWS, DaemonSet);
// go test -update rewrites the golden files.
func TestTemplateGolden(t *testing.T) {
	for _, values := range valueSets(t) {
		name := strings.TrimSuffix(filepath.Base(values), ".values.yaml")
		t.Run(name, func(t *testing.T) {
			out, err := template(t, "-f", values)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if out != string(want) {
				t.Errorf("helm template -f %s differs from %s (go test -update rewrites it); got:\n%s", values, golden, out)
			}
		})
	}
}

// objects renders the chart and decodes every object.
func objects(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, err := template(t, args...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var objs []map[string]any
	for _, doc := range strings.Split(out, "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("decoding %q: %v", doc, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind && o["metadata"].(map[string]any)["name"] == name {
			return o
		}
	}
	return nil
}

func path(o any, keys ...string) any {
	for _, k := range keys {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[k]
	}
	return o
}

// The grace period is computed from the drain flags, in every value set.
func TestGraceFollowsDrainFlags(t *testing.T) {
	objs := objects(t, "--set", "proxy.drainMaxWaitSeconds=45,proxy.shutdownTimeoutSeconds=20,proxy.terminationMarginSeconds=7")
	d := find(objs, "Deployment", "sluice-proxy")
	if got := path(d, "spec", "template", "spec", "terminationGracePeriodSeconds"); got != float64(72) {
		t.Errorf("terminationGracePeriodSeconds = %v, want 45+20+7", got)
	}
	args := path(d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"].([]any)
	for _, want := range []string{"--drain-max-wait=45s", "--shutdown-timeout=20s", "--health-on-traffic-port"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("proxy args %v lack %s", args, want)
		}
	}
}

// proxy.defaultCertificate names a Secret of the release namespace, and
// proxy.allowEncodedSlashes passes its flag; by default neither flag is
// rendered (the proxy generates its own default certificate).
func TestDefaultCertificateArgs(t *testing.T) {
	proxyArgs := func(set ...string) []any {
		t.Helper()
		d := find(objects(t, set...), "Deployment", "sluice-proxy")
		return path(d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"].([]any)
	}
	for _, a := range proxyArgs() {
		if s := a.(string); strings.HasPrefix(s, "--default-certificate") || strings.HasPrefix(s, "--allow-encoded-slashes") {
			t.Errorf("default values render %s", s)
		}
	}
	args := proxyArgs("--set", "proxy.defaultCertificate=wildcard-tls,proxy.allowEncodedSlashes=true")
	for _, want := range []string{"--default-certificate=sluice-system/wildcard-tls", "--allow-encoded-slashes"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("proxy args %v lack %s", args, want)
		}
	}
}

// Bad values fail with a clear message, not a broken manifest.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"proxy.kind=StatefulSet", "/proxy/kind"},
		{"proxy.provider=nginx", "/proxy/provider"},
		{"controller.allowedHAProxyRuntimeAPIs[0]=10.0.0.1:9999", "allowedHAProxyRuntimeAPIs"},
		{"controller.allowedAWSTargetGroups[0]=tag:sluice.dev/frontend=internet", "tag:sluice.dev/frontend=NAMESPACE/NAME"},
		{"controller.allowedAWSTargetGroups[0]=tag:sluice.dev/frontend=*", "tag:sluice.dev/frontend=NAMESPACE/NAME"},
		{"proxy.drainMaxWaitSeconds=-1", "drainMaxWaitSeconds"},
		{"proxy.unknownValue=1", "unknownValue"},
		{"proxy.defaultCertificate=other/tls", "defaultCertificate"},
	} {
		out, err := template(t, "--set", tc.set)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: err %v, output lacks %q:\n%s", tc.set, err, tc.want, out)
		}
	}
}

// deploy/*.yaml and the chart's CRDs are generated; the committed files
// must be what scripts/generate-deploy.sh writes now.
func TestDeployGenerated(t *testing.T) {
	helm(t)
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts/generate-deploy.sh"))
	cmd.Env = append(os.Environ(), "SLUICE_DEPLOY_OUT="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate-deploy.sh: %v\n%s", err, out)
	}
	generated, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(generated) == 0 {
		t.Fatal("nothing generated")
	}
	for _, g := range generated {
		compare(t, g, filepath.Join(root, "deploy", filepath.Base(g)))
	}
	crds, _ := filepath.Glob(filepath.Join(root, "deploy/crds/*.yaml"))
	inChart, _ := filepath.Glob(filepath.Join(chart, "crds/*.yaml"))
	if len(crds) == 0 || len(crds) != len(inChart) {
		t.Errorf("deploy/crds has %d files, the chart's crds/ %d", len(crds), len(inChart))
	}
	for _, c := range crds {
		compare(t, c, filepath.Join(chart, "crds", filepath.Base(c)))
	}
}

func compare(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Errorf("%v (run make generate)", err)
		return
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s is not what the chart generates: run make generate (scripts/generate-deploy.sh)", got)
	}
}

// Every value in values.yaml has a row in the chart's README table.
func TestValuesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = true
	}
	var keys []string
	leaves("", values, &keys)
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("value %s has no row in deploy/helm/sluice/README.md", k)
		}
	}
	for k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("README.md documents %s, which values.yaml lacks", k)
		}
	}
}

// wholeValues are maps documented as one value (Kubernetes objects).
var wholeValues = []string{"metrics.grafanaDashboard.labels", "controller.resources", "proxy.resources", "ingressClasses",
	"controller.podSecurityContext", "controller.securityContext", "proxy.podSecurityContext", "proxy.securityContext"}

// leaves lists the dotted paths of values.yaml: maps are descended into
// unless empty (an empty map or list is a value users fill).
func leaves(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || slices.Contains(wholeValues, prefix) {
		*out = append(*out, prefix)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leaves(p, m[k], out)
	}
}

// Every metric the Grafana dashboard queries is registered by the code.
func TestDashboardMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chart, "dashboards/sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	registered := registeredMetrics(t)
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range regexp.MustCompile(`\bsluice_[a-z0-9_]+`).FindAllString(tg.Expr, -1) {
				used++
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && registered[b] {
						base = b
					}
				}
				if !registered[base] {
					t.Errorf("panel %q uses %s, which no Go code registers", p.Title, name)
				}
			}
		}
	}
	if used == 0 {
		t.Error("the dashboard uses no sluice metric")
	}
}

// registeredMetrics greps the non-test Go code for metric names: either
// Name: "sluice_x" or Namespace: "sluice", Name: "x".
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	full := regexp.MustCompile(`Name:\s*"(sluice_[a-z0-9_]+)"`)
	split := regexp.MustCompile(`Namespace:\s*"sluice",\s*Name:\s*"([a-z0-9_]+)"`)
	names := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range full.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
		for _, m := range split.FindAllSubmatch(src, -1) {
			names["sluice_"+string(m[1])] = true
		}
		return nil
	})
	if err != nil || len(names) == 0 {
		t.Fatalf("finding registered metrics: %v (%d found)", err, len(names))
	}
	return names
}

// proxyArgs returns the proxy container's args of a workload.
func proxyArgs(o map[string]any) []any {
	cs, _ := path(o, "spec", "template", "spec", "containers").([]any)
	if len(cs) == 0 {
		return nil
	}
	args, _ := cs[0].(map[string]any)["args"].([]any)
	return args
}

// ingressClassArg returns the proxy's --ingress-class value ("" if none).
func ingressClassArg(o map[string]any) string {
	for _, a := range proxyArgs(o) {
		if v, ok := strings.CutPrefix(a.(string), "--ingress-class="); ok {
			return v
		}
	}
	return ""
}

// Without fleets, the one proxy serves every class of the chart, as one
// fleet for all classes did before --ingress-class narrowed it.
func TestOneFleetServesEveryClass(t *testing.T) {
	objs := objects(t, "-f", "testdata/aws.values.yaml")
	d := find(objs, "Deployment", "sluice-proxy")
	if got := ingressClassArg(d); got != "sluice-internet,sluice-internal" {
		t.Errorf("--ingress-class=%s, want both classes", got)
	}
	for _, o := range objs {
		if o["kind"] == "LoadBalancerBinding" {
			if got := path(o, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); got != "sluice-proxy" {
				t.Errorf("binding %v selects %v, want sluice-proxy", path(o, "metadata", "name"), got)
			}
		}
	}
}

// A binding with a proxy block gets its own fleet: its own workload,
// selector, PDB and classes, its values overriding proxy.*; its binding
// selects only that fleet; the default fleet keeps the classes left.
func TestFleetPerBinding(t *testing.T) {
	objs := objects(t, "-f", "testdata/fleets.values.yaml")
	for _, tc := range []struct {
		kind, name, binding, classes string
		replicas                     any
		gate                         bool
	}{
		{"Deployment", "sluice-proxy", "lab", "sluice-lab", float64(2), true},
		{"Deployment", "sluice-proxy-internet", "internet", "sluice-internet", float64(4), true},
		{"DaemonSet", "sluice-proxy-internal", "internal", "sluice-internal", nil, false},
	} {
		w := find(objs, tc.kind, tc.name)
		if w == nil {
			t.Errorf("no %s %s", tc.kind, tc.name)
			continue
		}
		if got := ingressClassArg(w); got != tc.classes {
			t.Errorf("%s: --ingress-class=%s, want %s", tc.name, got, tc.classes)
		}
		if got := path(w, "spec", "replicas"); got != tc.replicas {
			t.Errorf("%s: replicas %v, want %v", tc.name, got, tc.replicas)
		}
		if got := path(w, "spec", "template", "spec", "readinessGates") != nil; got != tc.gate {
			t.Errorf("%s: readiness gate %t, want %t", tc.name, got, tc.gate)
		}
		podLabels := path(w, "spec", "template", "metadata", "labels").(map[string]any)
		if podLabels["app.kubernetes.io/name"] != tc.name || path(w, "spec", "selector", "matchLabels", "app.kubernetes.io/name") != tc.name {
			t.Errorf("%s: pod labels %v / selector do not name the fleet", tc.name, podLabels)
		}
		if sa := path(w, "spec", "template", "spec", "serviceAccountName"); sa != "sluice-proxy" {
			t.Errorf("%s: service account %v, want the proxies' sluice-proxy", tc.name, sa)
		}
		b := find(objs, "LoadBalancerBinding", tc.binding)
		if got := path(b, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); got != tc.name {
			t.Errorf("binding %s selects %v, want fleet %s", tc.binding, got, tc.name)
		}
		if got := path(b, "spec", "readinessGate"); got != tc.gate {
			t.Errorf("binding %s: readinessGate %v, want %t", tc.binding, got, tc.gate)
		}
		pdb := find(objs, "PodDisruptionBudget", tc.name)
		if got := path(pdb, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); got != tc.name {
			t.Errorf("PDB of %s selects %v", tc.name, got)
		}
		// Prometheus scrapes every fleet: a metrics Service of the proxies'
		// ServiceMonitor selects it.
		m := find(objs, "Service", tc.name+"-metrics")
		if path(m, "spec", "selector", "app.kubernetes.io/name") != tc.name || path(m, "metadata", "labels", "app.kubernetes.io/component") != "proxy-metrics" {
			t.Errorf("%s: metrics Service %v does not select the fleet for the proxies' ServiceMonitor", tc.name, path(m, "spec"))
		}
	}
	if sm := find(objs, "ServiceMonitor", "sluice-proxy"); path(sm, "spec", "selector", "matchLabels", "app.kubernetes.io/component") != "proxy-metrics" {
		t.Errorf("proxies' ServiceMonitor: %v", path(sm, "spec"))
	}
	internet := find(objs, "Deployment", "sluice-proxy-internet")
	if got := path(internet, "spec", "template", "spec", "topologySpreadConstraints"); got == nil ||
		path(got.([]any)[0], "whenUnsatisfiable") != "DoNotSchedule" || path(got.([]any)[0], "maxSkew") != float64(1) {
		t.Errorf("internet fleet topology spread %v: want the fleet's whenUnsatisfiable and the default maxSkew", got)
	}

	// Every class a fleet of its own: no default fleet, and no PDB for it.
	objs = objects(t, "-f", "testdata/fleets.values.yaml", "--set", "bindings[2].proxy.replicas=1")
	if find(objs, "Deployment", "sluice-proxy") != nil || find(objs, "PodDisruptionBudget", "sluice-proxy") != nil {
		t.Error("default fleet rendered although every class has a fleet")
	}
	if d := find(objs, "Deployment", "sluice-proxy-lab"); ingressClassArg(d) != "sluice-lab" {
		t.Errorf("lab fleet: %v", proxyArgs(d))
	}
}

func TestBadFleets(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"bindings[0].selector.matchLabels.a=b", "selector and proxy are exclusive"},
		{"bindings[0].proxy.ingressClass=x", "not a fleet value"},
		{"ingressClasses[0].binding=internal", "none names internet"},
		{"bindings[0].proxy.replicas=-1", "replicas"},
	} {
		out, err := template(t, "-f", "testdata/fleets.values.yaml", "--set", tc.set)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: err %v, output lacks %q:\n%.2000s", tc.set, err, tc.want, out)
		}
	}
}

// proxy.allowEndpointsWithoutPod reaches every fleet and the controller.
func TestAllowEndpointsWithoutPod(t *testing.T) {
	objs := objects(t, "-f", "testdata/fleets.values.yaml", "--set", "proxy.allowEndpointsWithoutPod=true")
	for _, w := range []map[string]any{find(objs, "Deployment", "sluice-proxy"), find(objs, "Deployment", "sluice-proxy-internet"),
		find(objs, "DaemonSet", "sluice-proxy-internal"), find(objs, "Deployment", "sluice-controller")} {
		if !slices.Contains(proxyArgs(w), any("--allow-endpoints-without-pod")) {
			t.Errorf("%v: args %v lack --allow-endpoints-without-pod", path(w, "metadata", "name"), proxyArgs(w))
		}
	}
	if d := find(objects(t), "Deployment", "sluice-proxy"); slices.Contains(proxyArgs(d), any("--allow-endpoints-without-pod")) {
		t.Error("--allow-endpoints-without-pod set by default")
	}
}

// ingressNginxCompat reaches every fleet and the controller; off by
// default.
func TestIngressNginxCompat(t *testing.T) {
	objs := objects(t, "-f", "testdata/fleets.values.yaml", "--set", "ingressNginxCompat.enabled=true", "--set", "ingressNginxCompat.className=legacy")
	for _, w := range []map[string]any{find(objs, "Deployment", "sluice-proxy"), find(objs, "Deployment", "sluice-proxy-internet"),
		find(objs, "DaemonSet", "sluice-proxy-internal"), find(objs, "Deployment", "sluice-controller")} {
		args := proxyArgs(w)
		if !slices.Contains(args, any("--ingress-nginx-compat")) || !slices.Contains(args, any("--ingress-nginx-class=legacy")) {
			t.Errorf("%v: args %v lack --ingress-nginx-compat --ingress-nginx-class=legacy", path(w, "metadata", "name"), args)
		}
	}
	if d := find(objects(t), "Deployment", "sluice-proxy"); slices.Contains(proxyArgs(d), any("--ingress-nginx-compat")) {
		t.Error("--ingress-nginx-compat set by default")
	}
}

// TestUninstallRemovesIngressDaemonSets: whether the chart's
// IngressDaemonSet comes from proxy.kind or from one binding's own proxy
// fleet, the pre-delete Job deletes it first (--ingress-daemonsets); a
// chart without one does not ask for it.
func TestUninstallRemovesIngressDaemonSets(t *testing.T) {
	const fleetIDS = `ingressClasses: [{name: sluice, binding: edge}, {name: plain, binding: plain}]
bindings:
  - name: edge
    provider: {haproxy: {runtimeAPI: "tcp://10.0.0.5:9999", backend: sluice}}
    proxy: {kind: IngressDaemonSet, ingressDaemonSet: {podsPerNode: 2, healthCheckNodePort: 10080}}
  - name: plain
    provider: {haproxy: {runtimeAPI: "tcp://10.0.0.5:9999", backend: other}}
`
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleet, []byte(fleetIDS), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"proxy.kind", []string{"-f", "testdata/ingressdaemonset.values.yaml"}, true},
		{"a binding's fleet", []string{"-f", fleet}, true},
		{"deployments", []string{"-f", "testdata/haproxy.values.yaml"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, asks := false, false
			for _, o := range objects(t, tc.args...) {
				if o["kind"] != "Job" {
					continue
				}
				found = true
				out, _ := yaml.Marshal(o)
				asks = strings.Contains(string(out), "--ingress-daemonsets")
			}
			if !found {
				t.Fatal("no uninstall Job rendered")
			}
			if asks != tc.want {
				t.Errorf("the uninstall Job passes --ingress-daemonsets: %v, want %v", asks, tc.want)
			}
		})
	}
}
