//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/dns/rfc2136/bindtest"
	"sluice.dev/sluice/test/cluster"
	"sluice.dev/sluice/test/load"
	"sluice.dev/sluice/test/testenv"
)

// Namespaces of TestPrivilege besides the release's (proxyNS) and the
// app's: a second binding namespace (teamA), a tenant with its own DNS
// domains (teamB; both named with TestTenancy's), and one that is
// neither, where `kubectl auth can-i --list` shows what a service account
// holds cluster-wide.
const elsewhere = "elsewhere"

// TestPrivilege is issue 24's end-to-end proof of least privilege, with
// sluice installed by `helm install` of deploy/helm/sluice into a
// namespace that enforces the restricted Pod Security profile, on the
// local cluster, whose API server enforces RBAC and runs the PodSecurity
// admission plugin (a default plugin; test/cluster does not restrict
// them). The chart runs with every feature that widens RBAC: the zone
// floor's webhooks, IngressDaemonSets, DNS (rfc2136, with the TSIG key
// and the ownership key from Secrets) and a second binding namespace.
// Under load through HAProxy:
//
//   - privilege-rbac, once per service account of the chart (controller,
//     proxy, the uninstall Job's; node-health bound as README says):
//     `kubectl auth can-i --list` as it, in a namespace that is neither
//     the release's nor a binding namespace, less what every service
//     account holds; fails on any cluster-wide write other than Ingress
//     status, Events, Nodes (IngressDaemonSets), sluice's own CRDs and the
//     release's webhook configurations by name;
//   - privilege-pss: the pods the chart's workloads created (the
//     uninstall Job's template included) and the pod creations Pod
//     Security refused; a non-compliant pod is refused first, or the case
//     could not fail;
//   - dns-forged-txt, dns-foreign-types, dns-namespace-domains, dns-apex
//     (privilege_dns_test.go): attacks on DNS ownership against a real
//     BIND, read from BIND.
func TestPrivilege(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed")
	}
	if _, err := os.Stat("/usr/sbin/named"); err != nil {
		t.Skip("named (bind9) not installed")
	}
	e := bootClusterOf(t, "slp", cluster.Nodes(2, 2))
	h := &helmEnv{env: e, bin: helmBinary(t, e.root), chart: filepath.Join(e.root, "deploy/helm/sluice")}
	bind := bindtest.StartOn(t, e.c.BridgeIP().String(), corpZone, publicZone)
	api := testenv.FreeAddr(t, e.c.BridgeIP().String())
	e.lbAPI = "ipv4@" + api
	e.startHAProxy()

	restricted := map[string]string{}
	for _, mode := range []string{"enforce", "audit", "warn"} {
		restricted["pod-security.kubernetes.io/"+mode] = "restricted"
		restricted["pod-security.kubernetes.io/"+mode+"-version"] = "latest"
	}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: proxyNS, Labels: restricted}})
	for _, ns := range []string{teamA, teamB, elsewhere} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	enforced := e.podSecurityEnforced()

	d := newDNSAttack(e, bind)
	d.plant()
	e.create(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "sluice-dns-ownership"},
			Data: map[string][]byte{"keys": []byte(randomKey(t) + "\n")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "sluice-tsig"},
			Data: map[string][]byte{"secret": []byte(bind.Secret + "\n")}},
	)
	h.values = filepath.Join(e.dir, "values.yaml")
	more := filepath.Join(e.dir, "privilege.values.yaml")
	h.extra = []string{more}
	if err := os.WriteFile(h.values, []byte(helmValues("tcp://"+api)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(more, []byte(privilegeValues(bind.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	installOut := h.install()
	e.create(echoObjects()...)
	h.ready()
	e.create(nodeHealthBinding()...)
	job := h.uninstallJob()

	// The load only witnesses that routing keeps working meanwhile
	// (failed=0): a fifth of the usual rate keeps this suite's share of a
	// shared machine small, and slow counts requests over 5 s, not 1 s,
	// since latency is not what these cases are about (on a 2-core machine
	// shared with other suites' builds, stalls of 1–3 s were seen in
	// cases that only create an Ingress).
	e.loadOpts = func(o *load.Options) { o.Rate, o.SlowAfter = rate/5, 5*time.Second }
	cs := newCases(e)
	for _, sa := range []string{controllerName, proxyName, release + "-remove-bindings", release + "-node-health"} {
		cs.runNoted("privilege-rbac", func() string { return e.rbacCase(sa) })
	}
	cs.runNoted("privilege-pss", func() string { return e.pssCase(enforced, installOut, job) })
	d.cases(cs)
}

// privilegeValues are TestPrivilege's chart values over helmValues: two
// proxies, and every feature that widens what the controller may do.
func privilegeValues(dnsServer string) string {
	return fmt.Sprintf(`proxy:
  replicas: 2
controller:
  bindingNamespaces: [%[1]s, %[2]s]
  evictionWebhook: {enabled: true}
  ingressDaemonSets: {enabled: true}
  extraArgs: ["--dns-interval=%[3]s"]
  dns:
    provider: rfc2136
    zones: [%[4]s, %[5]s]
    ownerID: e2e
    ttl: 5s
    deleteDelay: %[6]s
    namespaceDomains:
      %[7]s: [%[4]s, "*.%[4]s"]
      %[8]s: ["*.%[5]s"]
    ownershipKeySecret: {name: sluice-dns-ownership, key: keys}
    rfc2136:
      server: %[9]q
      tsigKeyName: %[10]s
      tsigSecret: {name: sluice-tsig, key: secret}
networkPolicy:
  enabled: true
`, proxyNS, teamA, dnsInterval, corpZone, publicZone, dnsDelay, appNS, teamB, dnsServer, bindtest.KeyName)
}

func randomKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// podSecurityEnforced checks, with server-side dry runs, that the release
// namespace refuses a pod without seccompProfile for PodSecurity and
// admits the same pod with it: the enforcement privilege-pss relies on.
func (e *env) podSecurityEnforced() string {
	e.t.Helper()
	ctx := context.Background()
	yes, no := true, false
	pod := func(seccomp bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, GenerateName: "pss-check-"}, Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes},
			Containers: []corev1.Container{{Name: "c", Image: "sluice", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		}}
		if seccomp {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}
		return p
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err := e.kube.CoreV1().Pods(proxyNS).Create(ctx, pod(false), dry)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		e.t.Fatalf("a pod without seccompProfile in %s: %v; want Forbidden by PodSecurity (is the admission plugin on, the namespace labelled?)", proxyNS, err)
	}
	e.t.Logf("privilege-pss sanity: a pod without seccompProfile is refused: %v", err)
	if _, err := e.kube.CoreV1().Pods(proxyNS).Create(ctx, pod(true), dry); err != nil {
		e.t.Fatalf("the same pod with seccompProfile RuntimeDefault was refused: %v", err)
	}
	return "noncompliant_refused=true"
}

// uninstallJob creates what `helm uninstall` would first: the release's
// pre-delete hooks (the uninstall Job's ServiceAccount, Role and
// RoleBinding, from `helm get hooks`), and its Job renamed, with a
// selector that matches no binding, so that its pod is admitted and runs
// as in an uninstall but deletes nothing. It waits for the Job to
// succeed and returns its name.
func (h *helmEnv) uninstallJob() string {
	h.t.Helper()
	ctx := context.Background()
	var job string
	for _, doc := range strings.Split(h.helm("get", "hooks", release, "-n", proxyNS), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			h.t.Fatalf("parsing a hook of the release: %v\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "Job" {
			u.SetName(u.GetName() + "-pss")
			job = u.GetName()
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			c := cs[0].(map[string]any)
			args, _ := c["args"].([]any)
			for i, a := range args {
				if strings.HasPrefix(fmt.Sprint(a), "--selector=") {
					args[i] = "--selector=sluice.dev/none=pss"
				}
			}
			c["args"] = args
			if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"); err != nil {
				h.t.Fatal(err)
			}
		}
		if err := h.cl.Create(ctx, u); err != nil {
			h.t.Fatalf("creating the hook %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if job == "" {
		h.t.Fatal("the release has no uninstall Job (the chart renders it with bindings)")
	}
	h.eventually(2*time.Minute, "the uninstall Job to succeed", func(ctx context.Context) (bool, error) {
		var j batchv1.Job
		if err := h.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: job}, &j); err != nil {
			return false, err
		}
		if j.Status.Failed > 0 {
			h.t.Fatalf("the uninstall Job failed: %+v", j.Status)
		}
		return j.Status.Succeeded > 0, nil
	})
	return job
}

// canIRule is one line of `kubectl auth can-i --list`.
type canIRule struct{ resource, urls, names, verbs string }

func (r canIRule) String() string {
	if r.resource == "" {
		return r.urls + " " + r.verbs
	}
	if r.names != "[]" {
		return r.resource + " " + r.names + " " + r.verbs
	}
	return r.resource + " " + r.verbs
}

var canIRow = regexp.MustCompile(`^(\S*)\s*(\[[^\]]*\])\s+(\[[^\]]*\])\s+(\[[^\]]*\])\s*$`)

// canI is `kubectl auth can-i --list` as user in namespace ns, raw and
// parsed.
func (e *env) canI(user, ns string) (string, []canIRule) {
	e.t.Helper()
	out := e.kubectl("auth", "can-i", "--list", "--as="+user, "-n", ns)
	rules := parseCanI(out)
	if len(rules) == 0 {
		e.t.Fatalf("no rules parsed from kubectl auth can-i --list as %s:\n%s", user, out)
	}
	return out, rules
}

// sorted sorts the words of a bracketed list ("[patch get]" → "[get
// patch]"): kubectl merges the rules of several roles in no fixed order.
func sorted(list string) string {
	words := strings.Fields(strings.Trim(list, "[]"))
	slices.Sort(words)
	return "[" + strings.Join(words, " ") + "]"
}

// parseCanI parses the table of `kubectl auth can-i --list`.
func parseCanI(out string) []canIRule {
	var rules []canIRule
	for _, line := range strings.Split(out, "\n")[1:] {
		if m := canIRow.FindStringSubmatch(line); m != nil {
			rules = append(rules, canIRule{m[1], m[2], sorted(m[3]), sorted(m[4])})
		}
	}
	return rules
}

// writeVerbs are the verbs that change something.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "approve", "sign", "*"}

func (r canIRule) writes() bool {
	for _, v := range strings.Fields(strings.Trim(r.verbs, "[]")) {
		if slices.Contains(writeVerbs, v) {
			return true
		}
	}
	return false
}

// allowedWrite says whether a cluster-wide write is one the chart may
// grant (README, Security): Ingress status, Events, the detach annotation
// on Nodes (patch, IngressDaemonSets), and get/patch of the release's
// webhook configurations by name (cluster-scoped objects: the issue's
// resourceNames rule). sluice's own CRDs are written only in their
// namespaces, never cluster-wide.
func (r canIRule) allowedWrite() bool {
	verbs := strings.Fields(strings.Trim(r.verbs, "[]"))
	onlyPatch := !slices.ContainsFunc(verbs, func(v string) bool { return slices.Contains(writeVerbs, v) && v != "patch" })
	switch {
	case r.resource == "ingresses.networking.k8s.io/status", r.resource == "events", r.resource == "events.events.k8s.io":
		return true
	case r.resource == "nodes":
		return onlyPatch
	case r.resource == "validatingwebhookconfigurations.admissionregistration.k8s.io",
		r.resource == "mutatingwebhookconfigurations.admissionregistration.k8s.io":
		return onlyPatch && r.names != "[]" && strings.Contains(r.names, release+"-")
	}
	return false
}

// rbacCase lists what service account sa of the release holds: in a
// namespace that is neither the release's nor a binding namespace (what
// it holds cluster-wide), less what any service account holds there; and
// in the release namespace. It fails on a cluster-wide write the chart
// may not grant.
func (e *env) rbacCase(sa string) string {
	e.t.Helper()
	_, base := e.canI("system:serviceaccount:"+elsewhere+":nobody", elsewhere)
	raw, rules := e.canI("system:serviceaccount:"+proxyNS+":"+sa, elsewhere)
	var cluster, writes, bad []string
	for _, r := range rules {
		if slices.Contains(base, r) {
			continue
		}
		cluster = append(cluster, r.String())
		if r.writes() {
			writes = append(writes, r.String())
			if !r.allowedWrite() {
				bad = append(bad, r.String())
			}
		}
	}
	// Rules only in the release namespace and in team-a, the binding
	// namespace that is not the release's.
	local := map[string][]string{}
	for _, ns := range []string{proxyNS, teamA} {
		_, in := e.canI("system:serviceaccount:"+proxyNS+":"+sa, ns)
		for _, r := range in {
			if !slices.Contains(rules, r) {
				local[ns] = append(local[ns], r.String())
			}
		}
		e.t.Logf("privilege-rbac: %s in namespace %s only (%d):\n  %s", sa, ns, len(local[ns]), strings.Join(local[ns], "\n  "))
	}
	e.t.Logf("privilege-rbac: kubectl auth can-i --list --as=system:serviceaccount:%s:%s -n %s\n%s", proxyNS, sa, elsewhere, raw)
	e.t.Logf("privilege-rbac: %s cluster-wide beyond every service account's (%d):\n  %s", sa, len(cluster), strings.Join(cluster, "\n  "))
	if len(bad) > 0 {
		e.t.Errorf("privilege-rbac: %s may write cluster-wide beyond Ingress status, Events, Nodes, sluice's CRDs and its webhook configurations:\n  %s", sa, strings.Join(bad, "\n  "))
	}
	return fmt.Sprintf("sa=%s rules_cluster_wide=%d write_rules_cluster_wide=%d unexpected_writes=%d rules_release_ns=%d rules_binding_ns=%d",
		sa, len(cluster), len(writes), len(bad), len(local[proxyNS]), len(local[teamA]))
}

// pssCase counts the pods the chart's workloads created in the restricted
// release namespace and the pod creations Pod Security refused
// (FailedCreate Events naming it), and helm's PodSecurity warnings.
func (e *env) pssCase(enforced, installOut, job string) string {
	e.t.Helper()
	ctx := context.Background()
	pods, err := e.kube.CoreV1().Pods(proxyNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	byOwner := map[string]int{}
	for _, p := range pods.Items {
		owner := "none"
		if len(p.OwnerReferences) > 0 {
			owner = p.OwnerReferences[0].Kind
		}
		byOwner[owner]++
	}
	events, err := e.kube.CoreV1().Events(proxyNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rejected, failedCreate := 0, 0
	for _, ev := range events.Items {
		if ev.Reason != "FailedCreate" {
			continue
		}
		failedCreate++
		if strings.Contains(ev.Message, "PodSecurity") {
			rejected++
			e.t.Errorf("privilege-pss: %s %s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
		}
	}
	warnings := strings.Count(installOut, "would violate PodSecurity")
	if warnings > 0 {
		e.t.Errorf("privilege-pss: helm install warned:\n%s", installOut)
	}
	want := map[string]int{"ReplicaSet": 4, "Job": 1} // 2 controllers, 2 proxies, the uninstall Job
	for k, n := range want {
		if byOwner[k] < n {
			e.t.Errorf("privilege-pss: %d pods of %s owners, want %d (job %s)", byOwner[k], k, n, job)
		}
	}
	return fmt.Sprintf("pods=%d rejected=%d failed_create=%d warnings=%d %s", len(pods.Items), rejected, failedCreate, warnings, enforced)
}

// nodeHealthBinding is what README asks of the user for IngressDaemonSets:
// a ServiceAccount bound to the chart's node-health ClusterRole.
func nodeHealthBinding() []client.Object {
	const name = release + "-node-health"
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: name}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: proxyNS, Name: name}},
		},
	}
}

// TestCanIRules checks the parsing and the verdicts of privilege-rbac on
// a canned `kubectl auth can-i --list` table, so that the case can fail:
// a cluster-wide Pod patch, any cluster-wide write of bindings, a webhook configuration
// patched without resourceNames and a wildcard are refused.
func TestCanIRules(t *testing.T) {
	const table = `Resources                                                    Non-Resource URLs   Resource Names            Verbs
events                                                       []                  []                        [create patch update]
nodes                                                        []                  []                        [patch get list watch]
ingresses.networking.k8s.io/status                           []                  []                        [update patch]
loadbalancerbindings.sluice.dev                              []                  []                        [get list watch update patch]
mutatingwebhookconfigurations.admissionregistration.k8s.io   []                  [sluice-zone-steer]       [patch]
pods                                                         []                  []                        [get patch]
loadbalancerbindings.sluice.dev/status                       []                  []                        [create]
validatingwebhookconfigurations.admissionregistration.k8s.io []                  []                        [patch]
deployments.apps                                             []                  []                        [*]
secrets                                                      []                  []                        [watch get list]
                                                             [/healthz]          []                        [get]
`
	rules := parseCanI(table)
	if len(rules) != 11 {
		t.Fatalf("parsed %d rules, want 11: %v", len(rules), rules)
	}
	var refused, writes []string
	for _, r := range rules {
		if r.writes() {
			writes = append(writes, r.resource)
			if !r.allowedWrite() {
				refused = append(refused, r.resource)
			}
		}
	}
	if want := []string{"loadbalancerbindings.sluice.dev", "pods", "loadbalancerbindings.sluice.dev/status", "validatingwebhookconfigurations.admissionregistration.k8s.io", "deployments.apps"}; !slices.Equal(refused, want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	if len(writes) != 9 {
		t.Errorf("writes %v, want 9", writes)
	}
	if rules[1].verbs != "[get list patch watch]" || rules[10].String() != "[/healthz] [get]" {
		t.Errorf("rules %v", rules)
	}
}
