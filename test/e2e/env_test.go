//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/test/cluster"
	"sluice.dev/sluice/test/load"
	"sluice.dev/sluice/test/testenv"
)

const (
	proxyNS   = "sluice-system"
	proxyName = "sluice-proxy"
	appNS     = "app"
	appName   = "echo"
	appHost   = "echo.test"
	backend   = "sluice"
	// grpcBackend is HAProxy's TCP-mode backend of the proxies (h2c).
	grpcBackend = "sluice-grpc"
)

// env is one cluster with HAProxy, the controller, the proxies and the app.
type env struct {
	t        *testing.T
	root     string
	dir      string
	sluice   string
	c        *cluster.Cluster
	kube     kubernetes.Interface
	cl       client.Client
	lbPort   int
	grpcPort int // HAProxy's TCP-mode frontend, backend grpcBackend
	lbSock   string
	lbArgs   []string // extra haproxy arguments (e.g. master-worker: -W -S SOCK)
	lbGlobal string   // extra lines of haproxy's global section
	lbBack   string   // extra lines of haproxy's backend section
	restarts int      // HAProxy restarts (names of new master sockets)
	lbAPI    string   // an extra runtime API address (ipv4@HOST:PORT) when set before startHAProxy, for controllers in pods
	haproxy  *testenv.Process
	mu       sync.Mutex
	ctl      *exec.Cmd
	ctlAddr  string              // metrics address
	ctlStart int                 // controller starts, for the log file name
	ctlArgs  []string            // extra controller flags
	ctlEnv   []string            // extra controller environment (KEY=VALUE); AWS_* of the test process are dropped then
	backends []string            // extra HAProxy backends (no servers), set before startHAProxy
	loadOpts func(*load.Options) // adjusts the load of every case (e.g. https through a TLS listener); nil: none
	holdNext bool                // the next case's load asks the echo pods to hold each answer (holdInFlight)

	// frontends are extra HAProxy frontends, set before startHAProxy, each
	// with a backend of its own name and no servers (a binding's
	// controller or the test adds them); startHAProxy gives each a port
	// on 127.0.0.1 in frontPorts.
	frontends  []frontend
	frontPorts map[string]int
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// build builds the sluice binary (or takes $SLUICE_BIN) and test/echo.
func build(t *testing.T, root, dir string) (sluice, echo string) {
	t.Helper()
	sluice = os.Getenv("SLUICE_BIN")
	targets := map[string]string{"echo": "./test/echo", "grpcecho": "./test/grpcecho/grpcserver", "echobasic": "./test/conformance/echobasic"}
	if sluice == "" {
		targets["sluice"] = "./cmd/sluice"
	}
	for name, pkg := range targets {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
		switch name {
		case "sluice":
			sluice = out
		case "echo":
			echo = out
		}
	}
	if out, err := exec.Command(sluice, "controller", "-h").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("leader-elect")) {
		t.Fatalf("%s has no controller command (register runController in cmd/sluice/main.go): %v\n%s", sluice, err, out)
	}
	return sluice, echo
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed")
	}
	e := newCluster(t, "sle")
	e.startHAProxy()
	e.startController()
	t.Cleanup(e.stopController)
	return e
}

// newCluster builds the binaries, starts the local cluster (network
// namespaces and links named after prefix) and installs the CRDs, RBAC
// and IngressClass; no load balancer, no controller yet.
func newCluster(t *testing.T, prefix string) *env {
	t.Helper()
	return newClusterOf(t, prefix, cluster.Nodes(3, 2))
}

// newClusterOf is newCluster with these nodes.
func newClusterOf(t *testing.T, prefix string, nodes []cluster.NodeSpec) *env {
	t.Helper()
	e := bootClusterOf(t, prefix, nodes)
	e.kubectl("apply", "-f", filepath.Join(e.root, "deploy/namespace.yaml"), "-f", filepath.Join(e.root, "deploy/crds"),
		"-f", filepath.Join(e.root, "deploy/rbac.yaml"), "-f", filepath.Join(e.root, "deploy/ingressclass.yaml"))
	e.eventually(30*time.Second, "CRD served", func(ctx context.Context) (bool, error) {
		return e.cl.List(ctx, &v1alpha1.LoadBalancerBindingList{}) == nil, nil
	})
	return e
}

// bootCluster builds the binaries and starts the local cluster (3 nodes in
// 2 zones), with nothing installed in it.
func bootCluster(t *testing.T, prefix string) *env {
	t.Helper()
	return bootClusterOf(t, prefix, cluster.Nodes(3, 2))
}

// images maps the container images of the suites to the binaries build
// made in dir: the Gateway API conformance suite's echo-basic to our
// implementation of its contract (test/conformance/echobasic), and its
// coredns (used only by UDPRoute tests, which no profile here runs) to
// the same binary, which idles when given coredns's -conf flag.
func images(sluice, echo, dir string) map[string]string {
	basic := filepath.Join(dir, "echobasic")
	return map[string]string{"sluice": sluice, "echo": echo, "grpcecho": filepath.Join(dir, "grpcecho"),
		"echo-basic": basic, "coredns": basic}
}

// bootClusterOf is bootCluster with these nodes.
func bootClusterOf(t *testing.T, prefix string, nodes []cluster.NodeSpec) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("e2e needs root (network namespaces)")
	}
	e := &env{t: t, root: repoRoot(t), dir: t.TempDir()}
	var echo string
	e.sluice, echo = build(t, e.root, e.dir)
	e.c = cluster.StartForTest(t, cluster.Options{Nodes: nodes, Images: images(e.sluice, echo, e.dir), Prefix: prefix})
	e.kube = e.c.Client()
	cl, err := client.New(e.c.RESTConfig(), client.Options{Scheme: ct.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	return e
}

func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(e.c.BinDir(), "kubectl"), append([]string{"--kubeconfig", e.c.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (e *env) eventually(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("waiting for %s: timed out after %v (last error: %v)", what, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startHAProxy runs HAProxy on 127.0.0.1 with an empty dynamic backend
// that the controller fills through the runtime API.
func (e *env) startHAProxy() {
	e.t.Helper()
	e.lbPort = testenv.FreePort(e.t, "127.0.0.1")
	e.grpcPort = testenv.FreePort(e.t, "127.0.0.1")
	e.lbSock = filepath.Join(e.dir, "haproxy.sock")
	extra := ""
	if e.lbAPI != "" {
		extra = "\n    stats socket " + e.lbAPI + " level admin"
	}
	cfg := fmt.Sprintf(`global
    stats socket %s mode 600 level admin%s
    maxconn 4000
%s
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 10s
    # A reload soft-stops the old process: without this it closes its
    # idle client connections at once, and a POST sent on one just then
    # is lost (clients may not send it again); with it, they stay open
    # until their next response, which carries Connection: close.
    option idle-close-on-response
frontend fe
    bind 127.0.0.1:%d
    default_backend %s
backend %s
    balance roundrobin
    option httpchk GET /healthz
%s
frontend fe-grpc
    mode tcp
    bind 127.0.0.1:%d
    default_backend %s
backend %s
    mode tcp
    balance roundrobin
    option httpchk GET /healthz
`, e.lbSock, extra, e.lbGlobal, e.lbPort, backend, backend, e.lbBack, e.grpcPort, grpcBackend, grpcBackend)
	for _, b := range e.backends {
		cfg += fmt.Sprintf("backend %s\n    balance roundrobin\n", b)
	}
	e.frontPorts = map[string]int{}
	for _, f := range e.frontends {
		port := testenv.FreePort(e.t, "127.0.0.1")
		e.frontPorts[f.name] = port
		cfg += f.config(port)
	}
	path := filepath.Join(e.dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.haproxy = testenv.StartHAProxy(e.t, testenv.HAProxy{Config: path, Args: e.lbArgs, Socket: e.lbSock, LogDir: e.dir})
}

// frontend is an extra HAProxy frontend and its backend, both named name.
type frontend struct {
	name string
	// tcp: TCP mode (TLS passes through to the servers), without health
	// checks; else HTTP mode checking /healthz, as the main frontend.
	tcp bool
}

func (f frontend) config(port int) string {
	if f.tcp {
		return fmt.Sprintf("frontend fe-%[1]s\n    mode tcp\n    bind 127.0.0.1:%[2]d\n    default_backend %[1]s\nbackend %[1]s\n    mode tcp\n    balance roundrobin\n", f.name, port)
	}
	return fmt.Sprintf("frontend fe-%[1]s\n    bind 127.0.0.1:%[2]d\n    default_backend %[1]s\nbackend %[1]s\n    balance roundrobin\n    option httpchk GET /healthz\n", f.name, port)
}

// lbCommand sends one command to HAProxy's runtime API and returns its
// answer.
func (e *env) lbCommand(cmd string) string {
	e.t.Helper()
	c, err := net.Dial("unix", e.lbSock)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", cmd); err != nil {
		e.t.Fatal(err)
	}
	out, _ := io.ReadAll(c) // HAProxy closes after the answer
	return string(out)
}

// startController runs `sluice controller` on the host with the admin
// kubeconfig.
func (e *env) startController() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ctlStart++
	if e.ctlAddr == "" {
		e.ctlAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(e.t, "127.0.0.1"))
	}
	logf, err := os.OpenFile(filepath.Join(e.c.Dir(), "logs", fmt.Sprintf("sluice-controller-%d.log", e.ctlStart)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(e.sluice, "controller", "--kubeconfig", e.c.Kubeconfig(),
		"--leader-election-namespace", proxyNS, "--metrics-address", e.ctlAddr,
		"--health-address", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(e.t, "127.0.0.1")), "--log-level", "debug",
		// Absent, the allow-lists allow no load balancer; the suites'
		// bindings are the operator's (ctlArgs may narrow them: the last
		// value of a flag wins).
		"--allowed-haproxy-runtime-apis=*", "--allowed-aws-target-groups=*")
	cmd.Args = append(cmd.Args, e.ctlArgs...)
	// The test run's SLUICE_ variables (SLUICE_KUBECONFIG) would be read
	// as flags; with ctlEnv, AWS_ variables are the suite's own.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && (e.ctlEnv == nil || !strings.HasPrefix(kv, "AWS_")) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, e.ctlEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); logf.Close() }()
	e.ctl = cmd
}

// killController ends the controller with SIGKILL: no lease release, no
// cleanup, as in a node crash.
func (e *env) killController() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctl != nil {
		_ = e.ctl.Process.Kill()
		e.ctl = nil
	}
}

func (e *env) stopController() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctl == nil {
		return
	}
	p := e.ctl.Process
	_ = p.Signal(syscall.SIGTERM)
	for i := 0; i < 50; i++ {
		if p.Signal(syscall.Signal(0)) != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = p.Kill()
	e.ctl = nil
}

// update reads obj (by its namespace and name), applies mutate and writes
// it back, again from a fresh read when the write conflicts: the
// deployment controller and sluice's controller write the status of the
// same objects the tests change, so a single Get+Update races them.
func (e *env) update(obj client.Object, mutate func()) error {
	ctx := context.Background()
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.cl.Get(ctx, key, obj); err != nil {
			return err
		}
		mutate()
		return e.cl.Update(ctx, obj)
	})
}

// binding creates or updates the HAProxy binding of the proxies.
// runtimeAPI is HAProxy's runtime API as a binding names it: the TCP
// address on the cluster bridge when there is one (controllers in pods),
// else the unix socket.
func (e *env) runtimeAPI() string {
	if a, ok := strings.CutPrefix(e.lbAPI, "ipv4@"); ok {
		return "tcp://" + a
	}
	return "unix://" + e.lbSock
}

func (e *env) binding(gate bool) {
	e.t.Helper()
	ctx := context.Background()
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "haproxy"}}
	spec := v1alpha1.LoadBalancerBindingSpec{
		Selector:      metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": proxyName}},
		Port:          intstr.FromString("http"),
		Provider:      v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: e.runtimeAPI(), Backend: backend}},
		ReadinessGate: &gate,
		Drain:         v1alpha1.DrainSpec{Handshake: &gate},
		Publish:       []v1alpha1.PublishAddress{{IP: "127.0.0.1"}},
	}
	var err error
	if e.cl.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.LoadBalancerBinding{}) == nil {
		err = e.update(b, func() { b.Spec = spec })
	} else {
		b.Spec = spec
		err = e.cl.Create(ctx, b)
	}
	if err != nil {
		e.t.Fatalf("writing binding: %v", err)
	}
}

// proxyDeployment is deploy/proxy.yaml with addresses for the process
// kubelet (every pod of a node shares its network namespace, so each
// listens on its own pod IP) and /healthz on the traffic port for HAProxy.
func (e *env) proxyDeployment() *appsv1.Deployment {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.root, "deploy/proxy.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(ct.Scheme()).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	d := obj.(*appsv1.Deployment)
	spec := &d.Spec.Template.Spec
	grace := int64(60)
	spec.TerminationGracePeriodSeconds = &grace
	c := &spec.Containers[0]
	c.Args = []string{"proxy", "--http-address=$(POD_IP):8080", "--https-address=", "--admin-address=$(POD_IP):9090",
		"--health-on-traffic-port", "--drain-max-wait=30s", "--shutdown-timeout=10s", "--log-format=text"}
	if !slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "POD_IP" }) { // deploy/proxy.yaml sets it
		c.Env = append(c.Env, corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	}
	c.ReadinessProbe.PeriodSeconds = 1
	return d
}

func echoObjects() []client.Object {
	class := "sluice"
	prefix := networkingv1.PathTypePrefix
	return append(echoApp(appNS, appName, 3, map[string]string{"app": appName}),
		&networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: appName},
			Spec: networkingv1.IngressSpec{
				IngressClassName: &class,
				Rules: []networkingv1.IngressRule{{Host: appHost, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
						Service: &networkingv1.IngressServiceBackend{Name: appName, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}},
				}}}},
			},
		})
}

// echoApp is namespace ns with an echo Deployment and its Service, both
// called name; the pods carry labels and answer with their own name in
// X-Echo-Name (so a response says which Service served it).
func echoApp(ns, name string, replicas int32, labels map[string]string) []client.Object {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	grace := int64(10)
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						TerminationGracePeriodSeconds: &grace,
						Containers: []corev1.Container{{
							Name: "echo", Image: "echo",
							Args: []string{"--listen", "$(POD_IP):8080", "--name", "$(POD_NAME)", "--shutdown-delay", "2s"},
							Env: []corev1.EnvVar{
								{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
								{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							},
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
							ReadinessProbe: &corev1.Probe{
								ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
								PeriodSeconds: 1, FailureThreshold: 1,
							},
						}},
					},
				},
			},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
		},
	}
}

func (e *env) create(objs ...client.Object) {
	e.t.Helper()
	for _, o := range objs {
		if err := e.cl.Create(context.Background(), o); err != nil {
			e.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// pods lists a deployment's pods: live (no deletionTimestamp) and terminating.
func (e *env) pods(ctx context.Context, ns, name string) (live, terminating []corev1.Pod, err error) {
	var list corev1.PodList
	sel := map[string]string{"app.kubernetes.io/name": name}
	if name == appName {
		sel = map[string]string{"app": name}
	}
	if err := e.cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
		return nil, nil, err
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			terminating = append(terminating, p)
		} else {
			live = append(live, p)
		}
	}
	return live, terminating, nil
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// settled waits until the deployment has rolled out completely: every
// replica updated and Ready, no old or terminating pod left.
func (e *env) settled(ns, name string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(timeout, ns+"/"+name+" settled", func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return false, err
		}
		want := *d.Spec.Replicas
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want {
			return false, nil
		}
		live, terminating, err := e.pods(ctx, ns, name)
		if err != nil || len(terminating) > 0 || int32(len(live)) != want {
			return false, err
		}
		for i := range live {
			if !ready(&live[i]) {
				return false, nil
			}
		}
		return true, nil
	})
}

// get sends one request through HAProxy.
func (e *env) get() (int, string, error) {
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", e.lbPort), nil)
	req.Host = appHost
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), nil
}

func itoa(n int) string { return strconv.Itoa(n) }
