//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// gateType is the readiness gate the tests' pods carry.
const gateType corev1.PodConditionType = "sluice.dev/test-gate"

// buildBinaries builds the test workloads into a temporary directory.
func buildBinaries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	root, err := findUp("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Dir(root)
	images := map[string]string{}
	for name, pkg := range map[string]string{"echo": "./test/echo", "incluster": "./test/cluster/internal/incluster"} {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
		images[name] = out
	}
	return images
}

type echoOpts struct {
	replicas int32
	gate     bool
	preStop  []string
	grace    int64
	extra    []string // extra args to echo
}

func echoDeployment(ns, name string, o echoOpts) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	grace := o.grace
	if grace == 0 {
		grace = 5
	}
	ctr := corev1.Container{
		Name:  "echo",
		Image: "registry.example/sluice/echo:test",
		Args:  append([]string{"--listen", "$(POD_IP):8080", "--name", "$(POD_NAME)"}, o.extra...),
		Env: []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds:    1,
			FailureThreshold: 1,
			TimeoutSeconds:   2,
		},
	}
	if len(o.preStop) > 0 {
		ctr.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: o.preStop}}}
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{ctr}, TerminationGracePeriodSeconds: &grace}
	if o.gate {
		spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gateType}}
	}
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &o.replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero},
			},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// eventually polls cond every 200 ms until it is true or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, lastErr)
	}
}

// livePods lists the pods of app that are not being deleted.
func livePods(ctx context.Context, c *Cluster, ns, app string) ([]corev1.Pod, error) {
	list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	if c := findCondition(p.Status.Conditions, t); c != nil {
		return c.Status
	}
	return ""
}

func isReady(p *corev1.Pod) bool { return podCondition(p, corev1.PodReady) == corev1.ConditionTrue }

// waitReadyPods waits until app has exactly n live pods, all Ready, and
// returns them.
func waitReadyPods(t *testing.T, c *Cluster, ns, app string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 90*time.Second, fmt.Sprintf("%d ready pods of %s", n, app), func(ctx context.Context) (bool, error) {
		all, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		pods = nil
		for _, p := range all.Items {
			if p.DeletionTimestamp != nil || !isReady(&p) {
				return false, nil
			}
			pods = append(pods, p)
		}
		return len(pods) == n, nil
	})
	return pods
}

// setGate sets the test readiness-gate condition of a pod with a status
// patch, as a controller would.
func setGate(ctx context.Context, c *Cluster, ns, name string, uid types.UID) error {
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"conditions":[{"type":%q,"status":"True","lastTransitionTime":%q}]}}`,
		uid, gateType, time.Now().UTC().Format(time.RFC3339))
	_, err := c.Client().CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get fetches url and returns its body.
func get(url string) (string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), err
}

// gone reports whether nothing answers at url any more. The address of a
// removed pod no longer exists, so a short timeout suffices.
func gone(url string) bool {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err == nil {
		resp.Body.Close()
	}
	return err != nil
}

// kubectl runs the cluster's kubectl.
func kubectl(t *testing.T, c *Cluster, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.BinDir(), "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
