//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/test/cluster"
	"sluice.dev/sluice/test/testenv"
)

const (
	release        = "sluice"
	controllerName = "sluice-controller"
)

// TestHelm installs sluice the way users do, with `helm install` of
// deploy/helm/sluice: the controller as two pods under its own service
// account (leader election on a Lease, the chart's RBAC, in-cluster
// config), the proxies from the chart, HAProxy in front with a TCP runtime
// API on the cluster bridge that the controller pods dial. Under load
// through HAProxy:
//
//   - helm-upgrade: `helm upgrade` changing a proxy flag rolls the proxies;
//   - helm-leader-kill: the leading controller frozen, then killed, in the
//     middle of a proxy rollout; the other replica takes the Lease and
//     finishes it (the line prints the handover time);
//   - helm-reinstall: `helm uninstall`, then `helm install` again: nothing
//     is left behind, nothing duplicated; the load runs once sluice is
//     back (an uninstall takes the proxies away, so it cannot run during);
//   - release-install: `make release`'s chart (scripts/release.sh, the
//     chart part, VERSION=0.2.0) replaces the source tree's: uninstall,
//     `helm install` of dist/sluice-0.2.0.tgz with no image tag, so every
//     pod runs ghcr.io/sluice-dev/sluice:0.2.0 (the cluster maps that
//     image to the test's binary); the load runs through it.
func TestHelm(t *testing.T) {
	// Any runtime API is allowed (the default allows only the chart's
	// bindings'): explain-unreachable-provider adds a binding whose load
	// balancer is nowhere. TestPrivilege covers the allow-lists.
	h := newChartEnv(t, "slh", chartOptions{values: "controller:\n  allowedHAProxyRuntimeAPIs: ['*']\n"})
	e := h.env

	cs := newCases(e)
	// Issue 28: `sluice explain` names the cause of each broken chain.
	e.explainCases(cs)
	cs.run("helm-upgrade", func() {
		h.helm("upgrade", release, h.chart, "-n", proxyNS, "-f", h.values, "--set", "proxy.logLevel=debug")
		e.settled(proxyNS, proxyName, 4*time.Minute)
	})
	cs.runNoted("helm-leader-kill", func() string {
		old := h.leader()
		h.helm("upgrade", release, h.chart, "-n", proxyNS, "-f", h.values, "--set", "proxy.logLevel=warn")
		e.eventually(time.Minute, "the rollout to start", func(ctx context.Context) (bool, error) {
			_, terminating, err := e.pods(ctx, proxyNS, proxyName)
			return len(terminating) > 0, err
		})
		handover := h.killLeader(old)
		e.settled(proxyNS, proxyName, 5*time.Minute)
		return fmt.Sprintf("lease_handover=%.1fs old_leader=%s new_leader=%s", handover.took.Seconds(), old.pod, handover.to)
	})
	// The uninstall takes the proxies away: the load of this case runs once
	// sluice is installed again (a no-op action: the load's 5 s tail).
	if cs.wants("helm-reinstall") {
		h.helm("uninstall", release, "-n", proxyNS, "--wait", "--timeout", "5m")
		left := h.leftovers()
		h.install()
		h.ready()
		dup := h.duplicates()
		if len(left)+len(dup) > 0 {
			t.Errorf("after helm uninstall, left behind: %q; after helm install again, duplicated: %q", left, dup)
		}
		cs.runNoted("helm-reinstall", func() string {
			return fmt.Sprintf("left_behind=%d duplicated=%d", len(left), len(dup))
		})
	}
	if cs.wants("release-install") {
		const version = "0.2.0"
		pkg := h.releaseChart(version)
		h.helm("uninstall", release, "-n", proxyNS, "--wait", "--timeout", "5m")
		if left := h.leftovers(); len(left) > 0 {
			t.Errorf("after helm uninstall, left behind: %q", left)
		}
		noTag := h.writeValues("values-release.yaml", "image: {tag: \"\"}\n")
		h.helm(append(append([]string{"install", release, pkg, "-n", proxyNS}, h.valueFiles()...), "-f", noTag)...)
		h.ready()
		images := h.releaseImages()
		for _, img := range images {
			if img != "ghcr.io/sluice-dev/sluice:"+version {
				t.Errorf("a pod of the release runs %s, not the release's image (tag %s)", img, version)
			}
		}
		cs.runNoted("release-install", func() string {
			// sluice_build_info on the leading controller's metrics and
			// on each proxy's admin port.
			addrs := []string{h.leader().addr}
			live, _, err := h.pods(context.Background(), proxyNS, proxyName)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range live {
				addrs = append(addrs, net.JoinHostPort(p.Status.PodIP, "9090"))
			}
			info := 0
			for _, a := range addrs {
				if hasBuildInfo(a) {
					info++
				}
			}
			if info != len(addrs) {
				t.Errorf("sluice_build_info on %d of %d metrics endpoints (%v)", info, len(addrs), addrs)
			}
			return fmt.Sprintf("chart=%s pods=%d build_info=%d/%d", filepath.Base(pkg), len(images), info, len(addrs))
		})
	}
}

// releaseChart runs scripts/release.sh for the chart only (the local
// cluster runs binaries, not images) and returns the packaged chart.
func (h *helmEnv) releaseChart(version string) string {
	h.t.Helper()
	dist := filepath.Join(h.dir, "dist")
	cmd := exec.Command(filepath.Join(h.root, "scripts/release.sh"))
	cmd.Env = append(os.Environ(), "VERSION="+version, "SLUICE_RELEASE_PARTS=chart", "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}
	return filepath.Join(dist, "sluice-"+version+".tgz")
}

// hasBuildInfo says whether the metrics at addr carry sluice_build_info.
func hasBuildInfo(addr string) bool {
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return err == nil && strings.Contains(string(body), "\nsluice_build_info{")
}

// releaseImages lists the image of every container of the release's
// running pods.
func (h *helmEnv) releaseImages() []string {
	h.t.Helper()
	var pods corev1.PodList
	if err := h.cl.List(context.Background(), &pods, client.InNamespace(proxyNS), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		h.t.Fatal(err)
	}
	var images []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	if len(images) == 0 {
		h.t.Fatal("no pod of the release")
	}
	return images
}

// chartOptions vary the cluster, load balancer and values of
// newChartEnv and installChart.
type chartOptions struct {
	// nodes of the cluster; nil: 3 nodes in 2 zones.
	nodes []cluster.NodeSpec
	// haproxy, if set, adjusts HAProxy's settings (lbArgs, lbGlobal,
	// lbBack) before it starts.
	haproxy func(e *env)
	// lb, if set, replaces HAProxy: it runs once the cluster is up, sets
	// up the load balancer the test drives (e.lbPort once it carries
	// traffic) and returns values over helmValues: at least its own
	// bindings (helmValues' names HAProxy).
	lb func(e *env) (values string)
	// setup, if set, runs once the cluster is up, before the load
	// balancer starts (e.g. other servers the controller dials, Secrets);
	// its values go over helmValues and lb's.
	setup func(e *env) (values string)
	// values override all the others (YAML; a values file merged over
	// them, as helm does).
	values string
	// base, if set, replaces helmValues: the values made of HAProxy's
	// runtime API address (tcp://HOST:PORT; "" with lb).
	base func(runtimeAPI string) string
}

// installChart starts a cluster (its names after prefix) with a load
// balancer in front (HAProxy unless opts.lb) and installs sluice with
// `helm install` of deploy/helm/sluice and helmValues: the controller as
// two pods under the chart's service account and RBAC (dialing HAProxy's
// runtime API on the cluster bridge), the proxies. It waits for the
// controller pods and a leader, nothing else.
func installChart(t *testing.T, prefix string, opts chartOptions) *helmEnv {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil && opts.lb == nil {
		t.Skip("haproxy not installed")
	}
	if opts.nodes == nil {
		opts.nodes = cluster.Nodes(3, 2)
	}
	e := bootClusterOf(t, prefix, opts.nodes)
	h := &helmEnv{env: e, bin: helmBinary(t, e.root), chart: filepath.Join(e.root, "deploy/helm/sluice")}
	runtimeAPI, lbValues, setupValues := "", "", ""
	if opts.setup != nil {
		setupValues = opts.setup(e)
	}
	if opts.lb != nil {
		lbValues = opts.lb(e)
	} else {
		api := testenv.FreeAddr(t, e.c.BridgeIP().String())
		e.lbAPI = "ipv4@" + api
		runtimeAPI = "tcp://" + api
		if opts.haproxy != nil {
			opts.haproxy(e)
		}
		e.startHAProxy()
	}
	base := helmValues
	if opts.base != nil {
		base = opts.base
	}
	h.values = h.writeValues("values.yaml", base(runtimeAPI))
	for i, v := range []string{lbValues, setupValues, opts.values} {
		if v != "" {
			h.extra = append(h.extra, h.writeValues(fmt.Sprintf("values-%d.yaml", i), v))
		}
	}
	h.install()
	h.settled(proxyNS, controllerName, 2*time.Minute)
	h.leader() // points the latency scrapes at the leader
	return h
}

// newChartEnv is installChart, then the app: it waits until requests pass
// through the load balancer and the Ingress status is published.
func newChartEnv(t *testing.T, prefix string, opts chartOptions) *helmEnv {
	t.Helper()
	h := installChart(t, prefix, opts)
	e := h.env
	e.create(echoObjects()...)
	h.ready()
	e.eventually(time.Minute, "ingress status published", func(ctx context.Context) (bool, error) {
		var ing networkingv1.Ingress
		err := e.cl.Get(ctx, client.ObjectKey{Namespace: appNS, Name: appName}, &ing)
		lbs := ing.Status.LoadBalancer.Ingress
		return err == nil && len(lbs) == 1 && lbs[0].IP == "127.0.0.1", err
	})
	return h
}

func (h *helmEnv) writeValues(name, yaml string) string {
	h.t.Helper()
	path := filepath.Join(h.dir, name)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// helmValues are the chart values of TestHelm: the image name maps to the
// test's sluice binary, every process listens on its pod IP (pods of a
// simulated node share its network namespace), and one binding drives
// the test's HAProxy.
func helmValues(runtimeAPI string) string {
	return fmt.Sprintf(`image: {repository: ghcr.io/sluice-dev/sluice, tag: e2e}
listenOnPodIP: true
controller:
  logFormat: text
  logLevel: debug
proxy:
  replicas: 3
  httpsPort: 0
  drainMaxWaitSeconds: 30
  shutdownTimeoutSeconds: 10
  terminationMarginSeconds: 20
  logFormat: text
bindings:
  - name: haproxy
    provider:
      haproxy: {runtimeAPI: %q, backend: %s}
    drain: {handshake: true}
    publish: [{ip: 127.0.0.1}]
`, runtimeAPI, backend)
}

type helmEnv struct {
	*env
	bin, chart, values string
	extra              []string // values files over values, in order
}

// valueFiles are the -f arguments of install and upgrade.
func (h *helmEnv) valueFiles() []string {
	args := []string{"-f", h.values}
	for _, f := range h.extra {
		args = append(args, "-f", f)
	}
	return args
}

// helmBinary is the pinned helm, installed by scripts/helm.sh.
func helmBinary(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "scripts/helm.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("installing helm (scripts/helm.sh): %v", err)
	}
	return strings.TrimSpace(string(out))
}

func (h *helmEnv) helm(args ...string) string {
	h.t.Helper()
	cmd := exec.Command(h.bin, append(args, "--kubeconfig", h.c.Kubeconfig())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// install runs `helm install` of the release and returns helm's output
// (its warnings included).
func (h *helmEnv) install() string {
	h.t.Helper()
	return h.helm(append([]string{"install", release, h.chart, "-n", proxyNS, "--create-namespace"}, h.valueFiles()...)...)
}

// ready waits for the app, the proxies and both controller replicas, and
// for answers through HAProxy.
func (h *helmEnv) ready() {
	h.t.Helper()
	h.settled(appNS, appName, 3*time.Minute)
	h.settled(proxyNS, proxyName, 4*time.Minute)
	h.settled(proxyNS, controllerName, 2*time.Minute)
	h.eventually(time.Minute, "a request through HAProxy", func(context.Context) (bool, error) {
		code, body, err := h.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})
	h.leader() // points the latency scrapes at the leader
}

type controllerPod struct{ pod, addr string }

// leader finds the controller pod that holds the Lease (the one whose
// leader_election_master_status is 1) and scrapes it from now on.
func (h *helmEnv) leader() controllerPod {
	h.t.Helper()
	var found controllerPod
	h.eventually(2*time.Minute, "a controller leader", func(ctx context.Context) (bool, error) {
		live, _, err := h.pods(ctx, proxyNS, controllerName)
		if err != nil {
			return false, err
		}
		for _, p := range live {
			if p.Status.PodIP == "" {
				continue
			}
			addr := net.JoinHostPort(p.Status.PodIP, "9091")
			if leads(addr) {
				found = controllerPod{pod: p.Name, addr: addr}
				return true, nil
			}
		}
		return false, nil
	})
	h.mu.Lock()
	h.ctlAddr = found.addr
	h.mu.Unlock()
	return found
}

func leads(addr string) bool {
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}

type handover struct {
	took time.Duration
	to   string
}

// killLeader takes the leading controller down without a Lease release,
// as a crash or a partition does, and times until the Lease names a new
// holder, which must be the other pod. It freezes the process (SIGSTOP)
// and kills it (SIGKILL) once the Lease moved: a SIGKILL alone makes the
// kubelet restart the container at once, and the restarted process would
// race the other replica for the Lease. To the Lease both are the same:
// no more renewals.
func (h *helmEnv) killLeader(old controllerPod) handover {
	h.t.Helper()
	ctx := context.Background()
	var lease coordinationv1.Lease
	if err := h.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: controllerName}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		h.t.Fatalf("reading the leader Lease: %v", err)
	}
	holder := *lease.Spec.HolderIdentity
	pid := 0
	for _, p := range h.c.Processes() {
		if p.Name == "pod "+proxyNS+"/"+old.pod+"/controller" {
			pid = p.PID
		}
	}
	if pid == 0 {
		h.t.Fatalf("no process for controller pod %s among %v", old.pod, h.c.Processes())
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		h.t.Fatalf("stopping the leader %s (pid %d): %v", old.pod, pid, err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	var took time.Duration
	h.eventually(2*time.Minute, "another controller to take the Lease", func(ctx context.Context) (bool, error) {
		var l coordinationv1.Lease
		if err := h.cl.Get(ctx, client.ObjectKeyFromObject(&lease), &l); err != nil {
			return false, err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == holder || *l.Spec.HolderIdentity == "" {
			return false, nil
		}
		took = time.Since(killed)
		return true, nil
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		h.t.Errorf("killing the leader %s (pid %d): %v", old.pod, pid, err)
	}
	next := h.leader()
	if next.pod == old.pod {
		h.t.Errorf("the Lease went back to %s, not to the other replica", old.pod)
	}
	return handover{took: took, to: next.pod}
}

// leftovers lists what `helm uninstall` left: objects of the release,
// the binding (its finalizer), servers in HAProxy's backend.
func (h *helmEnv) leftovers() []string {
	h.t.Helper()
	var left []string
	h.eventually(3*time.Minute, "the release's pods gone", func(ctx context.Context) (bool, error) {
		for _, name := range []string{proxyName, controllerName} {
			live, terminating, err := h.pods(ctx, proxyNS, name)
			if err != nil || len(live)+len(terminating) > 0 {
				return false, err
			}
		}
		return true, nil
	})
	out := h.kubectl("get", "all,serviceaccounts,roles,rolebindings,poddisruptionbudgets,leases,loadbalancerbindings", "-n", proxyNS,
		"-l", "app.kubernetes.io/instance="+release, "-o", "name")
	left = append(left, strings.Fields(out)...)
	out = h.kubectl("get", "clusterroles,clusterrolebindings,ingressclasses", "-l", "app.kubernetes.io/instance="+release, "-o", "name")
	left = append(left, strings.Fields(out)...)
	var bindings v1alpha1.LoadBalancerBindingList
	if err := h.cl.List(context.Background(), &bindings); err != nil {
		h.t.Fatal(err)
	}
	for _, b := range bindings.Items {
		left = append(left, "binding "+b.Namespace+"/"+b.Name+" finalizers="+strings.Join(b.Finalizers, ","))
	}
	for _, s := range h.haproxyServers() {
		left = append(left, "haproxy server "+s)
	}
	return left
}

// duplicates lists what a second install doubled: more replicas, classes,
// bindings or HAProxy servers than one install makes.
func (h *helmEnv) duplicates() []string {
	h.t.Helper()
	var dup []string
	ctx := context.Background()
	for name, want := range map[string]int{proxyName: 3, controllerName: 2} {
		live, _, err := h.pods(ctx, proxyNS, name)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(live) != want {
			dup = append(dup, fmt.Sprintf("%d %s pods", len(live), name))
		}
	}
	var classes networkingv1.IngressClassList
	var bindings v1alpha1.LoadBalancerBindingList
	if err := h.cl.List(ctx, &classes); err != nil {
		h.t.Fatal(err)
	}
	if err := h.cl.List(ctx, &bindings); err != nil {
		h.t.Fatal(err)
	}
	if len(classes.Items) != 1 || len(bindings.Items) != 1 {
		dup = append(dup, fmt.Sprintf("%d IngressClasses, %d bindings", len(classes.Items), len(bindings.Items)))
	}
	h.eventually(time.Minute, "HAProxy to hold exactly the proxies", func(context.Context) (bool, error) {
		return len(h.haproxyServers()) == 3, nil
	})
	return dup
}

// haproxyServers lists the servers in HAProxy's backend.
func (h *helmEnv) haproxyServers() []string {
	h.t.Helper()
	out := h.lbCommand(fmt.Sprintf("show servers state %s", backend))
	var servers []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// Data lines: be_id be_name srv_id srv_name srv_addr ...
		if len(f) > 4 && f[1] == backend {
			servers = append(servers, f[3]+"="+f[4])
		}
	}
	return servers
}

// killControllers ends every controller pod's process with SIGKILL (no
// Lease release, no cleanup, as in a crash); the kubelet restarts them,
// and they wait for the dead leader's Lease to expire. It returns how
// many it killed.
func (h *helmEnv) killControllers() int {
	h.t.Helper()
	n := 0
	for _, p := range h.c.Processes() {
		if strings.HasPrefix(p.Name, "pod "+proxyNS+"/"+controllerName+"-") && strings.HasSuffix(p.Name, "/controller") {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
				h.t.Errorf("killing %s (pid %d): %v", p.Name, p.PID, err)
				continue
			}
			n++
		}
	}
	if n == 0 {
		h.t.Fatalf("no controller process among %v", h.c.Processes())
	}
	return n
}

// bindingGate turns the readiness gate and the drain handshake of the
// chart's binding on or off, as a user editing it would.
func (h *helmEnv) bindingGate(on bool) {
	h.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"readinessGate":%t,"drain":{"handshake":%t}}}`, on, on)
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "haproxy"}}
	if err := h.cl.Patch(context.Background(), b, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		h.t.Fatalf("patching the binding: %v", err)
	}
}

// restartControllers restarts the controller Deployment as `kubectl
// rollout restart` does (each pod stopped gracefully) and waits for the
// new pods and a leader.
func (h *helmEnv) restartControllers() {
	h.t.Helper()
	h.restartDeployment(proxyNS, controllerName)
	h.settled(proxyNS, controllerName, 2*time.Minute)
	h.leader()
}

// chartAWSValues are values for a controller that talks to the AWS fake
// at url (on the cluster bridge), with more controller flags.
func chartAWSValues(url string, flags ...string) string {
	var env strings.Builder
	for _, kv := range fakeAWSEnv() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&env, "\n    - {name: %s, value: %q}", k, v)
	}
	args := append([]string{"--aws-endpoint=" + url}, flags...)
	return fmt.Sprintf("controller:\n  extraArgs: [%s]\n  env:%s\n", strings.Join(quoteAll(args), ", "), env.String())
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}
