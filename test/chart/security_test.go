package chart

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A grant is one verb on one resource that a service account holds, and
// where: "cluster" or "ns/NAME"; name is a resourceNames entry ("" for
// any object).
type grant struct {
	sa, scope, group, resource, verb, name string
}

func (g grant) String() string {
	s := fmt.Sprintf("%s: %s %s %s/%s", g.sa, g.scope, g.verb, g.group, g.resource)
	if g.name != "" {
		s += " named " + g.name
	}
	return s
}

// features is one value combination of the chart and what it turns on.
type features struct {
	name       string
	args       []string
	namespaces []string // binding namespaces; "*": every one
	ids        bool
	idsIn      []string // IngressDaemonSet namespaces; nil: the release namespace
	webhooks   bool
	watch      []string // proxy.watchNamespaces
	bindings   bool     // the chart creates bindings (and the uninstall Job)
	secrets    bool     // controller.readTLSSecrets
	nodeHealth bool     // the chart's own IngressDaemonSet: node-health bound
	// ctlSA and proxySA name the accounts the RBAC binds ("": the chart's).
	ctlSA, proxySA string
	gateway        bool // gatewayAPI.enabled
}

func combinations() []features {
	return []features{
		{name: "defaults", namespaces: []string{"sluice-system"}},
		{name: "ingressdaemonsets", args: []string{"--set", "controller.ingressDaemonSets.enabled=true,controller.bindingNamespaces={sluice-system,team-a}"},
			namespaces: []string{"sluice-system", "team-a"}, ids: true},
		{name: "webhooks", args: []string{"--set", "controller.evictionWebhook.enabled=true,controller.bindingNamespaces={team-a,team-b}"},
			namespaces: []string{"team-a", "team-b"}, webhooks: true},
		{name: "dns", args: []string{"--set", "controller.dns.provider=rfc2136,controller.dns.zones={example.com},controller.dns.ownerID=x,controller.dns.ownershipKeySecret.name=k," +
			"controller.dns.rfc2136.server=10.0.0.1:53,controller.dns.rfc2136.tsigKeyName=sluice,controller.dns.rfc2136.tsigSecret.name=tsig"},
			namespaces: []string{"sluice-system"}},
		{name: "ids-chart", args: []string{"-f", "testdata/ingressdaemonset.values.yaml"}, namespaces: []string{"sluice-system"}, ids: true, nodeHealth: true, bindings: true},
		{name: "service-accounts", args: []string{"--set", "controller.serviceAccount.create=false,controller.serviceAccount.name=platform,proxy.serviceAccount.name=edge,proxy.watchNamespaces={apps}"},
			namespaces: []string{"sluice-system"}, watch: []string{"apps"}, ctlSA: "platform", proxySA: "edge"},
		{name: "aws", args: []string{"-f", "testdata/aws.values.yaml"}, namespaces: []string{"sluice-system"}, bindings: true},
		{name: "ingressdaemonsets-elsewhere", args: []string{"--set", "controller.ingressDaemonSets.enabled=true,controller.ingressDaemonSets.namespaces={edge},controller.bindingNamespaces={sluice-system,edge}"},
			namespaces: []string{"sluice-system", "edge"}, ids: true, idsIn: []string{"edge"}},
		{name: "everywhere", args: []string{"--set", "controller.bindingNamespaces={*},controller.ingressDaemonSets.enabled=true,controller.ingressDaemonSets.namespaces={*},controller.evictionWebhook.enabled=true"},
			namespaces: []string{"*"}, ids: true, idsIn: []string{"*"}, webhooks: true},
		{name: "watch-namespaces", args: []string{"--set", "proxy.watchNamespaces={apps,web}"}, namespaces: []string{"sluice-system"}, watch: []string{"apps", "web"}},
		{name: "tls-secrets", args: []string{"--set", "controller.readTLSSecrets=true"}, namespaces: []string{"sluice-system"}, secrets: true},
		{name: "gateway-api", args: []string{"--set", "gatewayAPI.enabled=true"}, namespaces: []string{"sluice-system"}, gateway: true},
		{name: "gateway-api-watch-namespaces", args: []string{"--set", "gatewayAPI.enabled=true,proxy.watchNamespaces={apps}"}, namespaces: []string{"sluice-system"}, watch: []string{"apps"}, gateway: true},
	}
}

// expected is every permission the chart may grant with f (README,
// Security): nothing more, nothing less.
func expected(f features) map[grant]bool {
	out := map[grant]bool{}
	add := func(sa, scope, group string, resources, verbs []string, names ...string) {
		if len(names) == 0 {
			names = []string{""}
		}
		for _, r := range resources {
			for _, v := range verbs {
				for _, n := range names {
					out[grant{sa, scope, group, r, v, n}] = true
				}
			}
		}
	}
	read := []string{"get", "list", "watch"}
	ctl, proxy := "sluice-controller", "sluice-proxy"
	if f.ctlSA != "" {
		ctl = f.ctlSA
	}
	if f.proxySA != "" {
		proxy = f.proxySA
	}
	// Every install.
	add(ctl, "cluster", "networking.k8s.io", []string{"ingresses", "ingressclasses"}, read)
	add(ctl, "cluster", "networking.k8s.io", []string{"ingresses/status"}, []string{"update", "patch"})
	add(ctl, "cluster", "", []string{"services", "nodes"}, read)
	// Secrets: none, unless the TLS Secrets' problems are to be Events.
	if f.secrets {
		add(ctl, "cluster", "", []string{"secrets"}, read)
	}
	// EndpointSlices: the refused endpoints reported as EndpointsRefused;
	// Pods (their addresses), compared with the endpoints as the proxies do.
	add(ctl, "cluster", "discovery.k8s.io", []string{"endpointslices"}, read)
	add(ctl, "cluster", "", []string{"pods"}, []string{"list", "watch"})
	// Bindings read everywhere, written (finalizer, status) only in the
	// binding namespaces.
	add(ctl, "cluster", "sluice.dev", []string{"loadbalancerbindings"}, read)
	for _, g := range []string{"", "events.k8s.io"} {
		add(ctl, "cluster", g, []string{"events"}, []string{"create", "patch", "update"})
	}
	add(ctl, "ns/sluice-system", "coordination.k8s.io", []string{"leases"}, []string{"get", "list", "watch", "create", "update", "patch", "delete"})
	// The binding namespaces.
	for _, ns := range f.namespaces {
		scope := "ns/" + ns
		if ns == "*" {
			scope = "cluster"
		}
		add(ctl, scope, "", []string{"pods"}, []string{"get", "list", "watch", "patch"})
		add(ctl, scope, "", []string{"pods/status"}, []string{"patch", "update"})
		add(ctl, scope, "sluice.dev", []string{"loadbalancerbindings"}, []string{"update", "patch"})
		add(ctl, scope, "sluice.dev", []string{"loadbalancerbindings/status"}, []string{"get", "update", "patch"})
	}
	// The IngressDaemonSet namespaces, not the binding namespaces.
	idsIn := f.idsIn
	if idsIn == nil {
		idsIn = []string{"sluice-system"}
	}
	for _, ns := range idsIn {
		scope := "ns/" + ns
		if ns == "*" {
			scope = "cluster"
		}
		if f.ids {
			add(ctl, scope, "apps", []string{"deployments", "daemonsets"}, []string{"get", "list", "watch", "create", "update", "patch", "delete"})
			add(ctl, scope, "policy", []string{"poddisruptionbudgets"}, []string{"get", "list", "watch", "create"})
			add(ctl, scope, "sluice.dev", []string{"ingressdaemonsets"}, []string{"update", "patch"})
			add(ctl, scope, "sluice.dev", []string{"ingressdaemonsets/status"}, []string{"get", "update", "patch"})
		}
	}
	if f.ids {
		add(ctl, "cluster", "sluice.dev", []string{"ingressdaemonsets"}, read)
		add(ctl, "cluster", "", []string{"nodes"}, []string{"patch"})
	}
	if f.webhooks {
		// get: every replica keeps the others' CAs in the caBundle.
		add(ctl, "cluster", "admissionregistration.k8s.io", []string{"validatingwebhookconfigurations"}, []string{"get", "patch"}, "sluice-eviction-floor")
		add(ctl, "cluster", "admissionregistration.k8s.io", []string{"mutatingwebhookconfigurations"}, []string{"get", "patch"}, "sluice-zone-steer")
	}
	// The proxy.
	add(proxy, "cluster", "networking.k8s.io", []string{"ingressclasses"}, read)
	scopes := []string{"cluster"}
	if len(f.watch) > 0 {
		scopes = nil
		for _, ns := range f.watch {
			scopes = append(scopes, "ns/"+ns)
		}
	}
	for _, scope := range scopes {
		add(proxy, scope, "networking.k8s.io", []string{"ingresses"}, read)
		add(proxy, scope, "", []string{"services", "secrets"}, read)
		add(proxy, scope, "discovery.k8s.io", []string{"endpointslices"}, read)
		// Pods: an endpoint is used only if the Pod it names has its address.
		add(proxy, scope, "", []string{"pods"}, []string{"list", "watch"})
	}
	add(proxy, "ns/sluice-system", "", []string{"pods"}, read)
	// The health checkers of the chart's IngressDaemonSet: their node, and
	// the per-node Deployments and pods of the release namespace.
	if f.nodeHealth {
		add("sluice-node-health", "cluster", "", []string{"nodes"}, read)
		add("sluice-node-health", "ns/sluice-system", "", []string{"pods"}, read)
		add("sluice-node-health", "ns/sluice-system", "apps", []string{"deployments"}, read)
	}
	// Gateway API: read by both, statuses written by the controller.
	if f.gateway {
		const gw = "gateway.networking.k8s.io"
		add(ctl, "cluster", gw, []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants", "backendtlspolicies"}, read)
		add(ctl, "cluster", gw, []string{"gatewayclasses/status", "gateways/status", "httproutes/status", "grpcroutes/status", "backendtlspolicies/status"}, []string{"update", "patch"})
		// ConfigMaps: metadata cached, those BackendTLSPolicies name read.
		add(ctl, "cluster", "", []string{"namespaces", "configmaps"}, read)
		add(proxy, "cluster", gw, []string{"gatewayclasses"}, read)
		add(proxy, "cluster", "", []string{"namespaces"}, read)
		for _, scope := range scopes {
			add(proxy, scope, gw, []string{"gateways", "httproutes", "grpcroutes", "referencegrants", "backendtlspolicies"}, read)
			// The CA bundles of BackendTLSPolicies (only ca.crt is kept).
			add(proxy, scope, "", []string{"configmaps"}, read)
		}
	}
	// The uninstall Job deletes the release's bindings, and the chart's own
	// IngressDaemonSet before them.
	if f.bindings || f.nodeHealth {
		add("sluice-remove-bindings", "ns/sluice-system", "sluice.dev", []string{"loadbalancerbindings"}, []string{"get", "list", "delete", "patch"})
	}
	if f.nodeHealth {
		add("sluice-remove-bindings", "ns/sluice-system", "sluice.dev", []string{"ingressdaemonsets"}, []string{"get", "list", "delete"})
	}
	return out
}

// granted collects what the rendered RBAC gives each service account of
// the release (the uninstall Job's included). Roles and ClusterRoles bound
// by no binding grant nothing (the node-health ClusterRole is bound by the
// user).
func granted(t *testing.T, objs []map[string]any) map[grant]bool {
	t.Helper()
	type key struct{ kind, ns, name string }
	roles := map[key][]any{}
	for _, o := range objs {
		if k := o["kind"]; k == "Role" || k == "ClusterRole" {
			ns, _ := path(o, "metadata", "namespace").(string)
			if k == "ClusterRole" {
				ns = ""
			}
			rules, _ := o["rules"].([]any)
			roles[key{k.(string), ns, path(o, "metadata", "name").(string)}] = rules
		}
	}
	out := map[grant]bool{}
	for _, o := range objs {
		kind := o["kind"]
		if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
			continue
		}
		scope, ns := "cluster", ""
		if kind == "RoleBinding" {
			ns = path(o, "metadata", "namespace").(string)
			scope = "ns/" + ns
		}
		refKind := path(o, "roleRef", "kind").(string)
		refNS := ns
		if refKind == "ClusterRole" {
			refNS = ""
		}
		rules, ok := roles[key{refKind, refNS, path(o, "roleRef", "name").(string)}]
		if !ok {
			t.Errorf("%s %s binds a role the chart does not render", kind, path(o, "metadata", "name"))
		}
		for _, s := range o["subjects"].([]any) {
			sa := path(s, "name").(string)
			for _, r := range rules {
				names := strs(path(r, "resourceNames"))
				if len(names) == 0 {
					names = []string{""}
				}
				for _, g := range strs(path(r, "apiGroups")) {
					for _, res := range strs(path(r, "resources")) {
						for _, v := range strs(path(r, "verbs")) {
							for _, n := range names {
								out[grant{sa, scope, g, res, v, n}] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func diff(a, b map[grant]bool) []string {
	var out []string
	for g := range a {
		if !b[g] {
			out = append(out, g.String())
		}
	}
	sort.Strings(out)
	return out
}

// TestLeastPrivilege renders the chart for each feature combination and
// fails on any permission beyond README's Security list for it, and on
// any missing one.
func TestLeastPrivilege(t *testing.T) {
	for _, f := range combinations() {
		t.Run(f.name, func(t *testing.T) {
			objs := objects(t, f.args...)
			got, want := granted(t, objs), expected(f)
			if extra := diff(got, want); len(extra) > 0 {
				t.Errorf("broader than the Security list:\n  %s", strings.Join(extra, "\n  "))
			}
			if missing := diff(want, got); len(missing) > 0 {
				t.Errorf("missing:\n  %s", strings.Join(missing, "\n  "))
			}
			for g := range got {
				if g.group == "*" || g.resource == "*" || g.verb == "*" {
					t.Errorf("wildcard grant %s", g)
				}
			}
			if (find(objs, "ClusterRole", "sluice-node-health") != nil) != f.ids {
				t.Errorf("node-health ClusterRole rendered: %v, IngressDaemonSets: %v", !f.ids, f.ids)
			}
			webhooks(t, f, objs)
		})
	}
}

// webhooks: with the webhooks on, the chart creates both configurations,
// without caBundle, seeing only the binding namespaces, the steering one
// only the release's ReplicaSet pods; the controller is told their names.
func webhooks(t *testing.T, f features, objs []map[string]any) {
	t.Helper()
	v := find(objs, "ValidatingWebhookConfiguration", "sluice-eviction-floor")
	m := find(objs, "MutatingWebhookConfiguration", "sluice-zone-steer")
	if !f.webhooks {
		if v != nil || m != nil {
			t.Error("webhook configurations without controller.evictionWebhook.enabled")
		}
		return
	}
	if v == nil || m == nil {
		t.Fatal("webhook configurations missing")
	}
	for _, cfg := range []map[string]any{v, m} {
		hooks := cfg["webhooks"].([]any)
		if len(hooks) != 1 {
			t.Fatalf("%d webhooks", len(hooks))
		}
		h := hooks[0]
		if path(h, "clientConfig", "caBundle") != nil || path(h, "failurePolicy") != "Ignore" ||
			path(h, "clientConfig", "service", "name") != "sluice-controller-webhook" {
			t.Errorf("webhook %v", h)
		}
		sel := path(h, "namespaceSelector", "matchExpressions")
		if slices.Contains(f.namespaces, "*") {
			if sel != nil {
				t.Errorf("namespaceSelector %v with every namespace", sel)
			}
		} else if e, _ := sel.([]any); len(e) != 1 || path(e[0], "key") != "kubernetes.io/metadata.name" ||
			!slices.Equal(strs(path(e[0], "values")), f.namespaces) {
			t.Errorf("namespaceSelector %v, want the binding namespaces %v", sel, f.namespaces)
		}
	}
	if path(m, "webhooks").([]any)[0].(map[string]any)["objectSelector"] == nil {
		t.Error("the steering webhook has no objectSelector")
	}
	// Every replica serves the webhooks: the Service selects every
	// controller pod (the Deployment's own selector), not only a leader.
	ctl := find(objs, "Deployment", "sluice-controller")
	svc := find(objs, "Service", "sluice-controller-webhook")
	if svc == nil {
		t.Fatal("no webhook Service")
	}
	sel, _ := path(svc, "spec", "selector").(map[string]any)
	podLabels, _ := path(ctl, "spec", "template", "metadata", "labels").(map[string]any)
	if want := path(ctl, "spec", "selector", "matchLabels"); len(sel) == 0 || !reflect.DeepEqual(any(sel), want) {
		t.Errorf("webhook Service selects %v, want the controller Deployment's selector %v", sel, want)
	}
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("webhook Service selector %s=%v not on the controller pods %v", k, v, podLabels)
		}
	}
	args := strs(path(ctl, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"])
	for _, want := range []string{"--eviction-webhook-configuration=sluice-eviction-floor", "--zone-steer-webhook-configuration=sluice-zone-steer"} {
		if !slices.Contains(args, want) {
			t.Errorf("controller args %v lack %s", args, want)
		}
	}
}

// TestPodSecurity: every pod the chart renders, in every combination,
// meets the restricted Pod Security profile, and its admin, metrics,
// health and webhook listeners bind the pod's IP (never every interface).
func TestPodSecurity(t *testing.T) {
	for _, f := range append(combinations(), features{name: "low-port", args: []string{"--set", "proxy.httpPort=80,bindings[0].name=x,bindings[0].provider.haproxy.runtimeAPI=tcp://10.0.0.5:9999,bindings[0].provider.haproxy.backend=b"}}) {
		t.Run(f.name, func(t *testing.T) {
			pods := 0
			for _, o := range objects(t, f.args...) {
				switch o["kind"] {
				case "Deployment", "DaemonSet", "Job", "StatefulSet", "Pod", "IngressDaemonSet":
				default:
					continue
				}
				pods++
				name := fmt.Sprintf("%s %s", o["kind"], path(o, "metadata", "name"))
				spec := path(o, "spec", "template", "spec")
				if path(spec, "securityContext", "seccompProfile", "type") != "RuntimeDefault" || path(spec, "securityContext", "runAsNonRoot") != true {
					t.Errorf("%s: pod securityContext %v", name, path(spec, "securityContext"))
				}
				for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
					// An IngressDaemonSet's proxies serve node targets on the
					// host network: the one thing beyond the profile, as for
					// its health checkers (README, Security).
					if path(spec, k) == true && !(k == "hostNetwork" && o["kind"] == "IngressDaemonSet") {
						t.Errorf("%s: %s", name, k)
					}
				}
				for _, c := range path(spec, "containers").([]any) {
					sc := path(c, "securityContext")
					add := strs(path(sc, "capabilities", "add"))
					if path(sc, "allowPrivilegeEscalation") != false || !slices.Equal(strs(path(sc, "capabilities", "drop")), []string{"ALL"}) ||
						len(add) > 1 || (len(add) == 1 && add[0] != "NET_BIND_SERVICE") || path(sc, "privileged") == true {
						t.Errorf("%s: container securityContext %v", name, sc)
					}
					if f.name == "low-port" && strings.HasSuffix(name, "proxy") && !slices.Equal(add, []string{"NET_BIND_SERVICE"}) {
						t.Errorf("%s: port 80 without NET_BIND_SERVICE: %v", name, sc)
					}
					podIP(t, name, c)
				}
			}
			if pods < 2 {
				t.Errorf("only %d pod templates rendered", pods)
			}
		})
	}
}

// podIP checks the admin-type listen flags of container c.
func podIP(t *testing.T, name string, c any) {
	t.Helper()
	env := false
	envs, _ := path(c, "env").([]any)
	for _, e := range envs {
		if path(e, "name") == "POD_IP" && path(e, "valueFrom", "fieldRef", "fieldPath") == "status.podIP" {
			env = true
		}
	}
	for _, a := range strs(path(c, "args")) {
		for _, flag := range []string{"--admin-address=", "--metrics-address=", "--health-address=", "--eviction-webhook-address="} {
			if v, ok := strings.CutPrefix(a, flag); ok && (!strings.HasPrefix(v, "$(POD_IP):") || !env) {
				t.Errorf("%s: %s%s does not listen on the pod IP (POD_IP from status.podIP: %v)", name, flag, v, env)
			}
		}
	}
}
