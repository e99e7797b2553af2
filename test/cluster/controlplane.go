package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"sluice.dev/sluice/test/testenv"
)

// startControlPlaneProcess starts one control-plane binary with its log in
// logs/NAME.log and records it for Stop.
func (c *Cluster) startControlPlaneProcess(name, path string, args ...string) (*process, error) {
	p, err := startProcess(procSpec{
		name:    name,
		path:    path,
		args:    args,
		logPath: filepath.Join(c.dir, "logs", name+".log"),
		pidDir:  filepath.Join(c.slot.dir, "pids"),
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.control = append(c.control, p)
	c.everStarted = append(c.everStarted, Process{Name: name, PID: p.pid, start: p.start})
	c.mu.Unlock()
	c.log.Info("started", "process", name, "pid", p.pid)
	return p, nil
}

func (c *Cluster) startEtcd() (*process, string, error) {
	client, err := testenv.Port("127.0.0.1")
	if err != nil {
		return nil, "", err
	}
	peer, err := testenv.Port("127.0.0.1")
	if err != nil {
		return nil, "", err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	p, err := c.startControlPlaneProcess("etcd", c.etcdPath,
		"--name=local",
		"--data-dir="+filepath.Join(c.slot.dir, "etcd"),
		"--listen-client-urls="+url,
		"--advertise-client-urls="+url,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=local="+peerURL,
		"--logger=zap",
		"--log-level=warn",
	)
	return p, url, err
}

func (c *Cluster) startAPIServer(etcdURL string) (*process, error) {
	bind := c.net.bridgeIP.String()
	return c.startControlPlaneProcess("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+bind,
		"--advertise-address="+bind,
		"--secure-port="+strconv.Itoa(c.apiPort),
		"--tls-cert-file="+c.pki.serverCert,
		"--tls-private-key-file="+c.pki.serverKey,
		"--client-ca-file="+c.pki.caCert,
		"--token-auth-file="+c.pki.tokenFile,
		"--authorization-mode=Node,RBAC",
		// The process kubelet's API (kubectl logs): served on each node's
		// InternalIP with a certificate of the cluster CA, to the API
		// server's client certificate only.
		"--kubelet-certificate-authority="+c.pki.caCert,
		"--kubelet-client-certificate="+c.pki.kubeletClientCert,
		"--kubelet-client-key="+c.pki.kubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+c.pki.saPub,
		"--service-account-signing-key-file="+c.pki.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Webhooks (and aggregated APIs) are called at their Service's
		// endpoints (pod IPs, reachable on the bridge): this cluster has
		// no kube-proxy for ClusterIPs and no cluster DNS.
		"--enable-aggregator-routing=true",
		"--profiling=false",
		"--cert-dir="+filepath.Join(c.dir, "pki", "apiserver"),
	)
}

func (c *Cluster) startControllerManager(port int) (*process, error) {
	kc := c.internalKubeconfig
	return c.startControlPlaneProcess("kube-controller-manager", filepath.Join(c.binDir, "kube-controller-manager"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--service-account-private-key-file="+c.pki.saKey,
		"--root-ca-file="+c.pki.caCert,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--controllers=*",
		// The process kubelet renews Leases every 10 s; a long grace keeps a
		// CPU-starved machine from marking nodes NotReady and evicting pods.
		"--node-monitor-grace-period=2m",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.dir, "pki", "kube-controller-manager"),
		"--profiling=false",
	)
}

func (c *Cluster) startScheduler(port int) (*process, error) {
	kc := c.internalKubeconfig
	return c.startControlPlaneProcess("kube-scheduler", filepath.Join(c.binDir, "kube-scheduler"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.dir, "pki", "kube-scheduler"),
		"--profiling=false",
	)
}

// waitHTTP polls url until it answers 200, the process exits, or ctx ends.
func waitHTTP(ctx context.Context, p *process, url string, client *http.Client, logPath string) error {
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before %s answered; log tail:\n%s", p.name, p.err, url, tail(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (%s): %w; last: %s; log tail:\n%s", p.name, url, ctx.Err(), last, tail(logPath, 20))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// insecureLoopback is for the health endpoints of kube-controller-manager
// and kube-scheduler, which serve self-signed certificates on 127.0.0.1.
var insecureLoopback = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
}

// forwarder relays TCP connections from a loopback listener to the API
// server on the bridge, so the admin kubeconfig can say https://127.0.0.1
// while pods reach the same server on the bridge address.
type forwarder struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newForwarder(l net.Listener, target string) *forwarder {
	f := &forwarder{l: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			out, err := net.DialTimeout("tcp", f.target, 5*time.Second)
			if err != nil {
				in.Close()
				return
			}
			if !f.track(in, out) {
				return
			}
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
			in.Close()
			out.Close()
			<-done
			f.untrack(in, out)
		}()
	}
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// close stops accepting and cuts every relayed connection.
func (f *forwarder) close() {
	f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
