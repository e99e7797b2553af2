//go:build e2e

package cluster

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shellPod is a pod whose one container runs script with /bin/sh (the
// image only has to resolve).
func shellPod(name, script string, restart corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers: []corev1.Container{{
				Name: "main", Image: "echo", Command: []string{"/bin/sh", "-c", script},
			}},
		},
	}
}

// kubectlTry runs the cluster's kubectl and returns its output and error.
func kubectlTry(c *Cluster, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.BinDir(), "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
	out, err := cmd.Output()
	return string(out), err
}

// testLogs: kubectl logs through the API server to the process kubelet's
// API: the current run, --tail, --timestamps, --previous, and -f, which
// streams new lines and ends by itself when the container exits.
func testLogs(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	pods := c.Client().CoreV1().Pods(ns)
	for _, p := range []*corev1.Pod{
		shellPod("logger", "echo started; i=0; while :; do echo line $i; i=$((i+1)); sleep 0.1; done", corev1.RestartPolicyAlways),
		// $$$$: the kubelet turns $$ into $ (Kubernetes's $(VAR) escaping).
		shellPod("restarter", "echo run $$$$; sleep 0.5; exit 1", corev1.RestartPolicyAlways),
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, name := range []string{"logger", "restarter", "finite"} {
			_ = pods.Delete(ctx, name, metav1.DeleteOptions{})
		}
		eventually(t, 60*time.Second, "log pods removed", func(ctx context.Context) (bool, error) {
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app in (logger,restarter,finite)"})
			return err == nil && len(l.Items) == 0, err
		})
	}()

	var all string
	eventually(t, 60*time.Second, "kubectl logs logger", func(context.Context) (bool, error) {
		out, err := kubectlTry(c, "-n", ns, "logs", "logger")
		all = out
		return err == nil && strings.Contains(out, "line 40\n"), err // 4 s of output
	})
	if !strings.HasPrefix(all, "started\nline 0\nline 1\n") || strings.Contains(all, "====") {
		t.Errorf("kubectl logs logger: %q, want the container's output from its start, no kubelet marker", all)
	}
	tail := kubectl(t, c, "-n", ns, "logs", "logger", "--tail=2")
	if lines := strings.Split(strings.TrimSuffix(tail, "\n"), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "line ") {
		t.Errorf("kubectl logs --tail=2: %q", tail)
	}
	stamped := kubectl(t, c, "-n", ns, "logs", "logger", "--tail=1", "--timestamps")
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z line \d+\n$`).MatchString(stamped) {
		t.Errorf("kubectl logs --timestamps: %q", stamped)
	}
	// --since-time (whole seconds on the wire): exactly the lines stamped
	// at or after it, by the time the process kubelet read them.
	full := kubectl(t, c, "-n", ns, "logs", "logger", "--timestamps")
	fullLines := strings.Split(strings.TrimSuffix(full, "\n"), "\n")
	firstAt, _ := time.Parse(time.RFC3339Nano, strings.Fields(fullLines[0])[0])
	sinceT := firstAt.Truncate(time.Second).Add(2 * time.Second) // the logger has run longer: eventually above
	since := kubectl(t, c, "-n", ns, "logs", "logger", "--timestamps", "--since-time="+sinceT.Format(time.RFC3339))
	sinceLines := strings.Split(strings.TrimSuffix(since, "\n"), "\n")
	older := 0
	for _, l := range fullLines {
		if at, err := time.Parse(time.RFC3339Nano, strings.Fields(l)[0]); err == nil && at.Before(sinceT) {
			older++
		}
	}
	sinceFirst, err := time.Parse(time.RFC3339Nano, strings.Fields(sinceLines[0])[0])
	if err != nil || sinceFirst.Before(sinceT) || older == 0 || sinceLines[0] != fullLines[older] {
		t.Errorf("kubectl logs --since-time=%s: first line %q, want %q (the first of %d lines at or after it)", sinceT.Format(time.RFC3339), sinceLines[0], fullLines[min(older, len(fullLines)-1)], len(fullLines)-older)
	}

	// -f: the lines the loop writes from now on arrive while kubectl runs.
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(fctx, filepath.Join(c.BinDir(), "kubectl"), "--kubeconfig", c.Kubeconfig(), "-n", ns, "logs", "-f", "--tail=1", "logger")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	followed := 0
	var first string
	for followed < 20 && sc.Scan() {
		if first == "" {
			first = sc.Text()
		}
		followed++
	}
	cancel()
	_ = cmd.Wait()
	if followed < 20 || !strings.HasPrefix(first, "line ") {
		t.Errorf("kubectl logs -f: %d lines streamed (first %q), want 20", followed, first)
	}

	// --previous: the run before the current one.
	eventually(t, 60*time.Second, "restarter restarted", func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, "restarter", metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1, err
	})
	prev := kubectl(t, c, "-n", ns, "logs", "restarter", "--previous")
	cur := kubectl(t, c, "-n", ns, "logs", "restarter")
	run := regexp.MustCompile(`^run \d+\n$`)
	if !run.MatchString(prev) || !run.MatchString(cur) || prev == cur {
		t.Errorf("kubectl logs --previous: %q, current: %q; want two different runs", prev, cur)
	}

	// -f on a container that exits: attached while it runs (its first
	// line is out, its last ones not yet), kubectl returns by itself with
	// all of its output once the container ends.
	if _, err := pods.Create(ctx, shellPod("finite", "echo begin; sleep 8; for i in 1 2 3; do echo end $i; done", corev1.RestartPolicyNever), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before string
	eventually(t, 60*time.Second, "finite's first line", func(context.Context) (bool, error) {
		out, err := kubectlTry(c, "-n", ns, "logs", "finite")
		before = out
		return err == nil && strings.HasPrefix(out, "begin\n"), nil
	})
	fctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(fctx, filepath.Join(c.BinDir(), "kubectl"), "--kubeconfig", c.Kubeconfig(), "-n", ns, "logs", "-f", "finite").Output()
	ended := err == nil && fctx.Err() == nil
	if strings.Contains(before, "end") {
		t.Errorf("finite had ended before kubectl logs -f attached (%q): the case proves nothing", before)
	}
	if !ended || string(out) != "begin\nend 1\nend 2\nend 3\n" {
		t.Errorf("kubectl logs -f finite: %q, ended by itself: %t (%v)", out, ended, err)
	}
	t.Logf("e2e cluster-logs: followed_lines=%d previous_ok=%t follow_ended=%t since_time_lines=%d of %d", followed, run.MatchString(prev) && prev != cur, ended, len(sinceLines), len(fullLines))
}
