//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

// TestFloor runs the safety-floor cases through HAProxy in master-worker
// mode (haproxy -W -S), on one cluster:
//
//   - floor-haproxy-reload and floor-haproxy-restart: a seamless reload,
//     then a full restart of HAProxy under load; the controller sees the
//     new process (show info, every 100 ms here) and adds its servers back
//     in their last state at once, and deploy/haproxy/sluice-wait.lua holds
//     the requests that arrive before that;
//   - floor-selector-held: the binding's selector is edited to match
//     nothing under load: the guard holds every target (condition Held),
//     nothing fails; then, without load, the confirmation deregisters them
//     through the drain steps.
//
// Each line also gives min_zone_healthy, the fewest healthy targets any
// zone had in the binding's status, sampled every 100 ms.
func TestFloor(t *testing.T) {
	e := newCluster(t, "slf")
	master := filepath.Join(e.dir, "haproxy-master.sock")
	e.lbArgs = []string{"-W", "-S", master}
	// Requests that reach a new HAProxy process before the controller has
	// restored its servers wait (at most 1 s) instead of failing.
	e.lbGlobal = "    lua-load " + filepath.Join(e.root, "deploy/haproxy/sluice-wait.lua")
	e.lbBackend = "    http-request lua.sluice_wait_servers " + backend
	e.startHAProxy()
	e.ctlArgs = []string{"--haproxy-watch-interval=100ms"}
	e.startController()
	t.Cleanup(e.stopController)

	e.create(echoObjects()...)
	e.binding(true)
	e.create(e.proxyDeployment())
	e.settled(appNS, appName, 2*time.Minute)
	e.settled(proxyNS, proxyName, 2*time.Minute)
	e.eventually(30*time.Second, "a request through HAProxy", func(context.Context) (bool, error) {
		code, body, err := e.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})
	e.eventually(30*time.Second, "every zone of the binding healthy", func(ctx context.Context) (bool, error) {
		z, err := e.minZoneHealthy(ctx)
		return z > 0, err
	})

	cs := newCases(e)
	cs.runWith("floor-haproxy-reload", true, e.sampleZones(), func() {
		time.Sleep(2 * time.Second)
		before := e.haproxyPid(t)
		e.haproxyMaster(t, master, "reload")
		e.eventually(30*time.Second, "a new haproxy worker", func(context.Context) (bool, error) {
			pid := e.haproxyPid(t)
			return pid != 0 && pid != before, nil
		})
		time.Sleep(3 * time.Second)
	})
	// A restart stops the listener: connections refused meanwhile are the
	// restart's own outage, so this case reports its failures (by kind)
	// rather than asserting none.
	cs.runWith("floor-haproxy-restart", false, e.sampleZones(), func() {
		time.Sleep(2 * time.Second)
		e.restartHAProxy(t)
		time.Sleep(3 * time.Second)
	})
	cs.runWith("floor-selector-held", true, e.sampleZones(), func() {
		b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "haproxy"}}
		if err := e.update(b, func() {
			b.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "nothing"}}
		}); err != nil {
			t.Fatalf("editing the selector: %v", err)
		}
		e.eventually(30*time.Second, "the binding held", func(ctx context.Context) (bool, error) {
			c, err := e.bindingCondition(ctx, v1alpha1.ConditionHeld)
			return c.Status == metav1.ConditionTrue, err
		})
		time.Sleep(5 * time.Second) // held: traffic keeps flowing
	})
	if cs.wants("floor-selector-held") {
		// No target was lost while held.
		if n := e.servers(t); n != 3 {
			t.Errorf("HAProxy holds %d servers while held, want 3", n)
		}
		var b v1alpha1.LoadBalancerBinding
		if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: proxyNS, Name: "haproxy"}, &b); err != nil {
			t.Fatal(err)
		}
		if err := e.update(&b, func() {
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			b.Annotations[v1alpha1.AnnotationConfirmDeregister] = strconv.FormatInt(b.Generation, 10)
		}); err != nil {
			t.Fatal(err)
		}
		e.eventually(2*time.Minute, "the confirmed targets drained and deleted", func(ctx context.Context) (bool, error) {
			return e.servers(t) == 0, nil
		})
		if c, _ := e.bindingCondition(context.Background(), v1alpha1.ConditionHeld); c.Status != metav1.ConditionFalse {
			t.Errorf("Held after confirming: %+v", c)
		}
	}
	cs.report()
}

// bindingCondition reads a condition of the HAProxy binding.
func (e *env) bindingCondition(ctx context.Context, typ string) (metav1.Condition, error) {
	var b v1alpha1.LoadBalancerBinding
	if err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: "haproxy"}, &b); err != nil {
		return metav1.Condition{}, err
	}
	for _, c := range b.Status.Conditions {
		if c.Type == typ {
			return c, nil
		}
	}
	return metav1.Condition{}, nil
}

// minZoneHealthy is the fewest healthy targets of any zone in the HAProxy
// binding's status (-1 without zones).
func (e *env) minZoneHealthy(ctx context.Context) (int, error) {
	var b v1alpha1.LoadBalancerBinding
	if err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: "haproxy"}, &b); err != nil {
		return -1, err
	}
	least := -1
	for _, z := range b.Status.Zones {
		if least < 0 || int(z.Healthy) < least {
			least = int(z.Healthy)
		}
	}
	return least, nil
}

// sampleZones samples minZoneHealthy every 100 ms from now on; the
// returned func stops and gives the summary field.
func (e *env) sampleZones() func() string {
	stop := make(chan struct{})
	var mu sync.Mutex
	least := -1
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			z, err := e.minZoneHealthy(ctx)
			cancel()
			if err == nil && z >= 0 {
				mu.Lock()
				if least < 0 || z < least {
					least = z
				}
				mu.Unlock()
			}
		}
	}()
	return func() string {
		close(stop)
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("min_zone_healthy=%d", least)
	}
}

// runtime sends one command to HAProxy's runtime API.
func (e *env) runtime(t *testing.T, sock, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func (e *env) haproxyMaster(t *testing.T, master, cmd string) {
	t.Helper()
	e.runtime(t, master, cmd)
}

// haproxyPid is the worker's Pid from show info (0 when unreachable).
func (e *env) haproxyPid(t *testing.T) int {
	for _, l := range strings.Split(e.runtime(t, e.lbSock, "show info"), "\n") {
		if v, ok := strings.CutPrefix(l, "Pid: "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// servers counts sluice's servers in the backend.
func (e *env) servers(t *testing.T) int {
	n := 0
	for _, l := range strings.Split(e.runtime(t, e.lbSock, "show servers state "+backend), "\n") {
		if f := strings.Fields(l); len(f) > 3 && strings.HasPrefix(f[3], "sluice-") {
			n++
		}
	}
	return n
}

// restartHAProxy stops HAProxy (its master, by PID) and starts a new one
// with the same configuration: every dynamic server is gone.
func (e *env) restartHAProxy(t *testing.T) {
	t.Helper()
	old := e.haproxy
	_ = old.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = old.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = old.Process.Kill()
		<-done
	}
	logf, err := os.OpenFile(filepath.Join(e.dir, "haproxy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("haproxy", append([]string{"-db", "-f", filepath.Join(e.dir, "haproxy.cfg")}, e.lbArgs...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.haproxy = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		d := make(chan struct{})
		go func() { _ = cmd.Wait(); close(d) }()
		select {
		case <-d:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-d
		}
		logf.Close()
	})
	e.eventually(10*time.Second, "haproxy runtime API after the restart", func(context.Context) (bool, error) {
		return e.haproxyPid(t) != 0, nil
	})
}
