// Package cluster runs a real Kubernetes control plane and a process kubelet
// on one machine, for sluice's e2e tests and `make run`. It sits outside the
// data flow: it is the "Kubernetes" that sluice's watchers, controllers and
// rollout tests talk to.
//
// Start runs etcd, kube-apiserver (RBAC, service-account signing keys),
// kube-controller-manager and kube-scheduler, then registers Nodes and runs
// every pod scheduled to them as local processes: each node is a network
// namespace joined to a bridge, each pod gets its own 10.244.x.y address on
// its node's eth0, the image name maps to a local binary (Options.Images),
// and the pod's service-account files are bind-mounted at the usual path in
// a private mount namespace, so client-go's in-cluster config works
// unchanged (Secret volumes likewise, at their mountPath). Pod status, readiness probes, readiness gates, restarts,
// preStop hooks, graceful termination and eviction behave as with a real
// kubelet. Stop ends every process by PID and removes every namespace and
// link; Start removes what a crashed earlier run left behind.
//
// Start needs root (network namespaces, bind mounts).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"sluice.dev/sluice/test/testenv"
)

// NodeSpec describes one simulated node.
type NodeSpec struct {
	Name string // Node name and part of its network namespace's name
	Zone string // value of the topology.kubernetes.io/zone label
}

// Options configures Start.
type Options struct {
	// Dir holds the cluster's files: kubeconfig, pki/, logs/ (one file per
	// control-plane process plus cluster.log from the kubelet) and pods/
	// (one folder per pod with its containers' logs). Its previous content
	// is replaced. Empty: a new temporary directory that Stop removes.
	Dir string
	// Nodes to register. Empty: Nodes(3, 2).
	Nodes []NodeSpec
	// Images maps a container image to a local binary. An image matches by
	// its full name, its name without tag or digest, or its last path
	// element: "ghcr.io/x/sluice:v1" finds the key "sluice".
	Images map[string]string
	// Prefix names every network namespace and link this cluster creates,
	// followed by a slot number (clusters in parallel take different slots
	// and different 10.244.x.0/20 address blocks). 1-6 lower-case letters.
	// Empty: "slc".
	Prefix string
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler
	// and kubectl. Empty: $SLUICE_KUBE_BIN, else the directory printed by
	// scripts/kube-binaries.sh (found above the working directory), which
	// builds them the first time.
	BinDir string
	// Logger receives the cluster's own events (process starts, pod
	// lifecycle). Nil: logs/cluster.log in Dir.
	Logger *slog.Logger
	// StartTimeout bounds Start. Zero: 3 minutes.
	StartTimeout time.Duration
}

// Nodes returns n node specs named node-1…node-n spread round-robin over
// zones zone-a, zone-b, ….
func Nodes(n, zones int) []NodeSpec {
	zones = max(zones, 1)
	out := make([]NodeSpec, n)
	for i := range out {
		out[i] = NodeSpec{Name: fmt.Sprintf("node-%d", i+1), Zone: "zone-" + string(rune('a'+i%zones))}
	}
	return out
}

// Process is a process the cluster started.
type Process struct {
	Name  string // "kube-apiserver", or "pod NS/NAME/CONTAINER"
	PID   int
	start uint64
}

// Cluster is a running local cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	opts      Options
	log       *slog.Logger
	logFile   *os.File
	dir       string
	removeDir bool
	binDir    string
	etcdPath  string

	slot               *slot
	net                *network
	pki                *pki
	apiPort            int
	fwd                *forwarder
	kubeconfig         string
	internalKubeconfig string
	restConfig         *rest.Config
	client             kubernetes.Interface
	kubelet            *kubelet
	cancel             context.CancelFunc

	mu          sync.Mutex
	control     []*process // in start order
	everStarted []Process

	stopOnce sync.Once
	stopErr  error
}

var prefixRE = regexp.MustCompile(`^[a-z]{1,6}$`)

// Start starts a cluster and returns once the control plane is healthy,
// every node is Ready and schedulable and the default ServiceAccount
// exists. On error, everything already started is stopped.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local cluster needs root (network namespaces, bind mounts)")
	}
	if opts.Prefix == "" {
		opts.Prefix = "slc"
	}
	if !prefixRE.MatchString(opts.Prefix) {
		return nil, fmt.Errorf("prefix %q: want 1-6 lower-case letters", opts.Prefix)
	}
	if len(opts.Nodes) == 0 {
		opts.Nodes = Nodes(3, 2)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	ctx, cancelStart := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancelStart()

	c := &Cluster{opts: opts, dir: opts.Dir}
	if err := c.prepare(); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		c.log.Error("start failed", "error", err)
		c.Stop()
		return nil, err
	}
	return c, nil
}

// prepare finds binaries and makes the state directory and logger.
func (c *Cluster) prepare() error {
	for _, tool := range []string{"ip", "unshare", "sh", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("finding %s: %w", tool, err)
		}
	}
	// Pod processes start in their pod's folder: image paths must be
	// absolute.
	images := make(map[string]string, len(c.opts.Images))
	for name, p := range c.opts.Images {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("resolving image %s: %w", name, err)
		}
		images[name] = abs
	}
	c.opts.Images = images
	var err error
	if c.etcdPath, err = exec.LookPath("etcd"); err != nil {
		return fmt.Errorf("finding etcd (Debian package etcd-server): %w", err)
	}
	if c.binDir, err = findBinDir(c.opts.BinDir); err != nil {
		return err
	}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "sluice-cluster-"); err != nil {
			return fmt.Errorf("creating state dir: %w", err)
		}
		c.removeDir = true
	}
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		return fmt.Errorf("resolving state dir: %w", err)
	}
	for _, sub := range []string{"logs", "pods", "pki"} {
		_ = os.RemoveAll(filepath.Join(c.dir, sub))
		if err := os.MkdirAll(filepath.Join(c.dir, sub), 0o755); err != nil {
			return fmt.Errorf("creating state dir: %w", err)
		}
	}
	c.log = c.opts.Logger
	if c.log == nil {
		f, err := os.Create(filepath.Join(c.dir, "logs", "cluster.log"))
		if err != nil {
			return fmt.Errorf("creating cluster log: %w", err)
		}
		c.logFile = f
		c.log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// findBinDir returns the directory with the Kubernetes binaries.
func findBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("SLUICE_KUBE_BIN")
	}
	if dir == "" {
		script, err := findUp(filepath.Join("scripts", "kube-binaries.sh"))
		if err != nil {
			return "", fmt.Errorf("finding the Kubernetes binaries (set BinDir or SLUICE_KUBE_BIN): %w", err)
		}
		cmd := exec.Command(script)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("running %s: %w", script, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("finding Kubernetes binaries in %s: %w", dir, err)
		}
	}
	return dir, nil
}

// findUp looks for rel in the working directory and its parents.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory", rel)
		}
		dir = parent
	}
}

func (c *Cluster) start(ctx context.Context) error {
	began := time.Now()
	var err error
	if c.slot, err = claimSlot(c.opts.Prefix, c.log.Info); err != nil {
		return err
	}
	c.log.Info("claimed slot", "slot", c.slot.name)
	c.net, err = newNetwork(c.slot, c.opts.Nodes)
	if err != nil {
		return err
	}
	bridge := c.net.bridgeIP
	if c.pki, err = newPKI(filepath.Join(c.dir, "pki"), []netip.Addr{bridge}); err != nil {
		return err
	}
	// The loopback listener picks the port; the API server takes the same
	// port on the bridge address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening on loopback: %w", err)
	}
	c.apiPort = l.Addr().(*net.TCPAddr).Port
	bridgeAddr := net.JoinHostPort(bridge.String(), strconv.Itoa(c.apiPort))
	c.fwd = newForwarder(l, bridgeAddr)
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	c.internalKubeconfig = filepath.Join(c.dir, "pki", "internal.kubeconfig")
	if err := c.pki.writeKubeconfig(c.kubeconfig, "https://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(c.apiPort))); err != nil {
		return err
	}
	if err := c.pki.writeKubeconfig(c.internalKubeconfig, "https://"+bridgeAddr); err != nil {
		return err
	}
	if c.restConfig, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	c.restConfig.QPS, c.restConfig.Burst = 100, 200
	if c.client, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return fmt.Errorf("creating client: %w", err)
	}

	etcd, etcdURL, err := c.startEtcd()
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", http.DefaultClient, c.logPath("etcd")); err != nil {
		return err
	}
	api, err := c.startAPIServer(etcdURL)
	if err != nil {
		return err
	}
	if err := c.waitAPIReady(ctx, api); err != nil {
		return err
	}
	c.log.Info("api server ready", "after", time.Since(began).Round(time.Millisecond))

	kcmPort, err := testenv.Port("127.0.0.1")
	if err != nil {
		return err
	}
	kcm, err := c.startControllerManager(kcmPort)
	if err != nil {
		return err
	}
	schedPort, err := testenv.Port("127.0.0.1")
	if err != nil {
		return err
	}
	sched, err := c.startScheduler(schedPort)
	if err != nil {
		return err
	}
	kctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.kubelet = newKubelet(kubeletOptions{
		client:  c.client,
		log:     c.log.With("component", "kubelet"),
		nodes:   c.opts.Nodes,
		net:     c.net,
		images:  c.opts.Images,
		apiHost: bridge.String(),
		apiPort: c.apiPort,
		caPEM:   c.pki.caPEM,
		pki:     c.pki,
		podsDir: filepath.Join(c.dir, "pods"),
		pidDir:  filepath.Join(c.slot.dir, "pids"),
		recordPID: func(p Process) {
			c.mu.Lock()
			c.everStarted = append(c.everStarted, p)
			c.mu.Unlock()
		},
	})
	if err := c.kubelet.registerNodes(ctx); err != nil {
		return err
	}
	if err := waitHTTP(ctx, kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), insecureLoopback, c.logPath("kube-controller-manager")); err != nil {
		return err
	}
	if err := waitHTTP(ctx, sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), insecureLoopback, c.logPath("kube-scheduler")); err != nil {
		return err
	}
	c.kubelet.start(kctx)
	if err := c.waitSettled(ctx); err != nil {
		return err
	}
	c.log.Info("cluster ready", "after", time.Since(began).Round(time.Millisecond), "kubeconfig", c.kubeconfig)
	return nil
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.dir, "logs", name+".log") }

// waitAPIReady polls /readyz through the client until it answers ok.
func (c *Cluster) waitAPIReady(ctx context.Context, api *process) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if api.exited() {
			return false, fmt.Errorf("kube-apiserver exited (%v); log tail:\n%s", api.err, tail(c.logPath("kube-apiserver"), 20))
		}
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver /readyz: %w (last: %v); log tail:\n%s", err, last, tail(c.logPath("kube-apiserver"), 20))
	}
	return nil
}

// waitSettled waits until the default ServiceAccount exists (pods can be
// created) and every node is Ready without taints (pods get scheduled).
func (c *Cluster) waitSettled(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, nil
		}
		if _, err := c.client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != len(c.opts.Nodes) {
			return false, nil
		}
		for _, n := range nodes.Items {
			if len(n.Spec.Taints) > 0 || !nodeReady(&n) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the default ServiceAccount and schedulable nodes: %w; controller-manager log tail:\n%s",
			err, tail(c.logPath("kube-controller-manager"), 20))
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Stop stops every pod process and control-plane process (SIGTERM, then
// SIGKILL), removes the network namespaces and links and, if Start made
// it, the state directory. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.cancel != nil {
			c.cancel()
		}
		began := time.Now()
		if c.kubelet != nil {
			c.kubelet.wait()
			c.log.Debug("pods stopped", "after", time.Since(began).Round(time.Millisecond))
		}
		c.mu.Lock()
		control := c.control
		c.mu.Unlock()
		// Reverse start order: clients of the API server first, etcd last.
		for i := len(control) - 1; i >= 0; i-- {
			control[i].stop(5 * time.Second)
			c.log.Debug("stopped", "process", control[i].name, "after", time.Since(began).Round(time.Millisecond))
		}
		if c.fwd != nil {
			c.fwd.close()
		}
		if c.net != nil {
			c.net.remove()
		}
		if c.slot != nil {
			c.slot.release()
		}
		for _, p := range c.Processes() {
			errs = append(errs, fmt.Errorf("process %s (pid %d) still runs after stop", p.Name, p.PID))
		}
		if c.log != nil {
			c.log.Info("cluster stopped")
		}
		if c.logFile != nil {
			c.logFile.Close()
		}
		if c.removeDir {
			_ = os.RemoveAll(c.dir)
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Processes returns the processes the cluster started that still run.
func (c *Cluster) Processes() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Process
	for _, p := range c.everStarted {
		if alive(p.PID, p.start) {
			out = append(out, p)
		}
	}
	return out
}

// Kubeconfig returns the path of the admin kubeconfig (server
// https://127.0.0.1:PORT).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// BridgeIP returns the root namespace's address on the bridge: pods reach
// the host (the API server, load balancers, providers) here.
func (c *Cluster) BridgeIP() netip.Addr { return c.net.bridgeIP }

// APIServerURL returns the API server's address on the bridge, as pods see
// it.
func (c *Cluster) APIServerURL() string {
	return "https://" + net.JoinHostPort(c.net.bridgeIP.String(), strconv.Itoa(c.apiPort))
}

// NodeNamespace returns the network namespace of node (for `ip netns exec`),
// or "" for an unknown node.
func (c *Cluster) NodeNamespace(node string) string {
	if nn := c.net.nodes[node]; nn != nil {
		return nn.netns
	}
	return ""
}

// NodeIP returns node's InternalIP.
func (c *Cluster) NodeIP(node string) netip.Addr {
	if nn := c.net.nodes[node]; nn != nil {
		return nn.ip
	}
	return netip.Addr{}
}

// BinDir returns the directory holding the Kubernetes binaries (kubectl).
func (c *Cluster) BinDir() string { return c.binDir }

// Dir returns the state directory.
func (c *Cluster) Dir() string { return c.dir }

// PodLogDir returns the folder holding the logs of a pod's containers
// (CONTAINER.log), or "" if this cluster never ran the pod.
func (c *Cluster) PodLogDir(namespace, name string) string {
	matches, _ := filepath.Glob(filepath.Join(c.dir, "pods", namespace+"_"+name+"_*"))
	if len(matches) == 0 {
		return ""
	}
	return matches[len(matches)-1]
}

// StartForTest starts a cluster for a test and stops it in t.Cleanup, also
// when the test fails. The state directory is kept when the test failed
// (its path is logged) and removed otherwise. Without root the test is
// skipped.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the local cluster needs root")
	}
	keep := opts.Dir == ""
	if keep {
		dir, err := os.MkdirTemp("", "sluice-cluster-")
		if err != nil {
			t.Fatal(err)
		}
		opts.Dir = dir
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting local cluster (state in %s): %v", opts.Dir, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping local cluster: %v", err)
		}
		if keep {
			if t.Failed() {
				t.Logf("local cluster state kept in %s", opts.Dir)
			} else {
				_ = os.RemoveAll(opts.Dir)
			}
		}
	})
	return c
}
