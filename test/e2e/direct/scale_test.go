//go:build e2e

package direct

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"sluice.dev/sluice/test/cluster"
	"sluice.dev/sluice/test/load"
	"sluice.dev/sluice/test/testenv"
)

const (
	ns   = "app"
	host = "echo.test"
)

// TestScaleUnderLoad serves an echo Deployment through sluice while it scales
// 3 → 6 → 1 → 3 and asserts that no request failed.
func TestScaleUnderLoad(t *testing.T) {
	bins := t.TempDir()
	build(t, bins, "sluice", "./cmd/sluice")
	build(t, bins, "echo", "./test/echo")
	c := cluster.StartForTest(t, cluster.Options{
		Images: map[string]string{"echo": filepath.Join(bins, "echo")},
		Prefix: "sldir",
	})
	client := c.Client()
	ctx := context.Background()

	createApp(t, client, 3)
	waitReady(t, client, 3)

	httpAddr, adminAddr := testenv.FreeAddr(t, "127.0.0.1"), testenv.FreeAddr(t, "127.0.0.1")
	startProxy(t, filepath.Join(bins, "sluice"), c.Kubeconfig(), httpAddr, adminAddr)
	waitServing(t, "http://"+httpAddr)

	type result struct {
		r   load.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := load.Run(ctx, load.Options{
			Target: "http://" + httpAddr, Host: host, Rate: 300, Duration: 45 * time.Second,
			KeepAliveFraction: 0.5,
			// A stall of the shared machine is latency, not a lost request:
			// leave room for a few seconds of it before counting drops.
			MaxInFlight: 5000, Timeout: 15 * time.Second,
		})
		done <- result{r, err}
	}()

	for _, n := range []int32{6, 1, 3} {
		time.Sleep(3 * time.Second)
		scale(t, client, n)
		waitReady(t, client, n)
		t.Logf("scaled to %d", n)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("load: %v", res.err)
	}
	line := fmt.Sprintf("e2e direct-scale: %s", res.r)
	t.Log(line)
	fmt.Println(line)
	// scripts/test.sh prints this file after the e2e stage.
	if path := os.Getenv("SLUICE_E2E_SUMMARY"); path != "" {
		if fh, err := os.OpenFile(filepath.Clean(path), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, _ = fh.WriteString(line + "\n")
			_ = fh.Close()
		}
	}
	if res.r.Sent == 0 || res.r.Failed != 0 || res.r.Slow != 0 {
		t.Fatalf("want 0 failed and 0 slow (over 1s) requests: %s (samples: %v)", res.r, res.r.Errors)
	}
}

func build(t *testing.T, dir, name, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
}

func startProxy(t *testing.T, bin, kubeconfig, httpAddr, adminAddr string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "proxy", "--kubeconfig", kubeconfig,
		"--http-address", httpAddr, "--https-address", "", "--admin-address", adminAddr,
		"--drain-max-wait", "0", "--shutdown-timeout", "5s")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sluice proxy exited with %v", err)
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Error("sluice proxy did not stop within 15s of SIGTERM")
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sluice log:\n%s", b)
		}
	})
}

// waitServing waits until the proxy routes the app.
func waitServing(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Host = host
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("sluice never served the echo app")
}

func createApp(t *testing.T, client kubernetes.Interface, replicas int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "echo"}
	grace := int64(30)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:  "echo",
						Image: "echo",
						// The pod keeps serving for 3s after SIGTERM while the
						// EndpointSlice change reaches the proxy, then finishes
						// in-flight requests: the usual contract of a backend.
						Args: []string{"--listen", "$(POD_IP):8080", "--name", "$(POD_NAME)", "--shutdown-delay", "3s"},
						Env: []corev1.EnvVar{
							{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "sluice"
	pt := networkingv1.PathTypePrefix
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: networkingv1.IngressClassSpec{Controller: "sluice.dev/ingress-controller"}}
	if _, err := client.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "echo", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}},
			}}}},
		},
	}
	if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scale(t *testing.T, client kubernetes.Interface, n int32) {
	t.Helper()
	ctx := context.Background()
	// The deployment controller writes the Deployment's status meanwhile:
	// a conflict means read the scale again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := client.AppsV1().Deployments(ns).GetScale(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		_, err = client.AppsV1().Deployments(ns).UpdateScale(ctx, "echo", s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scaling to %d: %v", n, err)
	}
}

// waitReady waits until the Deployment has exactly n ready pods and no
// terminating ones left.
func waitReady(t *testing.T, client kubernetes.Interface, n int32) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err == nil {
			var ready int32
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
						ready++
					}
				}
			}
			if ready == n && int32(len(pods.Items)) == n {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("deployment never reached %s ready pods", strconv.Itoa(int(n)))
}
