package cluster

import (
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testKubelet() *kubelet {
	return newKubelet(kubeletOptions{
		log:    slog.New(slog.DiscardHandler),
		images: map[string]string{"echo": "/bin/echo-server", "sluice": "/opt/sluice", "ghcr.io/x/special:v2": "/opt/special"},
	})
}

func TestResolveImage(t *testing.T) {
	k := testKubelet()
	for image, want := range map[string]string{
		"echo":                        "/bin/echo-server",
		"echo:latest":                 "/bin/echo-server",
		"registry.local:5000/a/echo":  "/bin/echo-server",
		"ghcr.io/sluice/sluice:v1.2":  "/opt/sluice",
		"sluice@sha256:abcd":          "/opt/sluice",
		"ghcr.io/x/special:v2":        "/opt/special",
		"registry.local:5000/unknown": "",
		"":                            "",
	} {
		got, ok := k.resolveImage(image)
		if got != want || ok != (want != "") {
			t.Errorf("resolveImage(%q) = %q, %v; want %q", image, got, ok, want)
		}
	}
}

func TestArgv(t *testing.T) {
	k := testKubelet()
	env := []string{"POD_IP=10.244.1.5", "PORT=8080"}
	for _, tc := range []struct {
		name     string
		cmd, arg []string
		want     []string
	}{
		{"args only", nil, []string{"--listen", "$(POD_IP):$(PORT)"}, []string{"/bin/echo-server", "--listen", "10.244.1.5:8080"}},
		{"command names the image", []string{"echo"}, []string{"-x"}, []string{"/bin/echo-server", "-x"}},
		{"command names another image", []string{"/usr/bin/sluice", "proxy"}, nil, []string{"/opt/sluice", "proxy"}},
		{"host command", []string{"sleep", "$(PORT)"}, nil, []string{"sleep", "8080"}},
		{"escaped and unknown", nil, []string{"$$(POD_IP)", "$(NOPE)"}, []string{"/bin/echo-server", "$(POD_IP)", "$(NOPE)"}},
	} {
		got := k.argv(corev1.Container{Image: "echo:1", Command: tc.cmd, Args: tc.arg}, "/bin/echo-server", env)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: argv = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSleepDuration(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want time.Duration
		ok   bool
	}{
		{[]string{"sleep", "5"}, 5 * time.Second, true},
		{[]string{"/bin/sleep", "0.5"}, 500 * time.Millisecond, true},
		{[]string{"sh", "-c", "sleep 3"}, 3 * time.Second, true},
		{[]string{"sh", "-c", "sleep 3 && kill 1"}, 0, false},
		{[]string{"sleep"}, 0, false},
		{[]string{"curl", "x"}, 0, false},
	} {
		d, ok := sleepDuration(tc.argv)
		if d != tc.want || ok != tc.ok {
			t.Errorf("sleepDuration(%q) = %v, %v; want %v, %v", tc.argv, d, ok, tc.want, tc.ok)
		}
	}
}

func testWorker(pod *corev1.Pod) *podWorker {
	k := testKubelet()
	nn := &nodeNet{ip: netip.MustParseAddr("10.244.1.1")}
	w := newPodWorker(k, nn, pod)
	w.ip = netip.MustParseAddr("10.244.1.7")
	w.setupDone = true
	return w
}

func TestDesiredStatusReadinessGates(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}},
		},
	}
	w := testWorker(pod)
	for _, c := range w.main {
		c.proc, c.ready, c.started = &process{}, true, true
	}
	cond := func(st corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
		return *findCondition(st.Conditions, t)
	}

	st := w.desiredStatus(pod)
	if st.Phase != corev1.PodRunning || st.PodIP != "10.244.1.7" || st.HostIP != "10.244.1.1" {
		t.Errorf("phase %s podIP %s hostIP %s", st.Phase, st.PodIP, st.HostIP)
	}
	if c := cond(st, corev1.ContainersReady); c.Status != corev1.ConditionTrue {
		t.Errorf("ContainersReady = %+v, want True", c)
	}
	if c := cond(st, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" {
		t.Errorf("Ready without gate condition = %+v, want False/ReadinessGatesNotReady", c)
	}

	pod.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionFalse}}
	if c := cond(w.desiredStatus(pod), corev1.PodReady); c.Status != corev1.ConditionFalse {
		t.Errorf("Ready with gate False = %+v", c)
	}
	pod.Status.Conditions[0].Status = corev1.ConditionTrue
	if c := cond(w.desiredStatus(pod), corev1.PodReady); c.Status != corev1.ConditionTrue {
		t.Errorf("Ready with gate True = %+v", c)
	}

	w.main[1].ready = false
	st = w.desiredStatus(pod)
	if c := cond(st, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Message != "containers with unready status: [b]" {
		t.Errorf("Ready with container b unready = %+v", c)
	}
}

func TestMergeStatusKeepsForeignConditions(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	st := corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: old},
		{Type: "example.com/lb", Status: corev1.ConditionTrue, LastTransitionTime: old},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: old},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: old},
	}}
	mergeStatus(&st, corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
	}})
	if len(st.Conditions) != 5 {
		t.Fatalf("conditions after merge: %+v", st.Conditions)
	}
	for _, c := range st.Conditions {
		switch c.Type {
		case corev1.PodScheduled, "example.com/lb":
			if c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&old) {
				t.Errorf("foreign condition changed: %+v", c)
			}
		case corev1.PodReady:
			if c.Status != corev1.ConditionTrue || c.LastTransitionTime.Equal(&old) {
				t.Errorf("Ready not updated with a new transition time: %+v", c)
			}
		case corev1.ContainersReady:
			if !c.LastTransitionTime.Equal(&old) {
				t.Errorf("unchanged ContainersReady got a new transition time: %+v", c)
			}
		case corev1.PodInitialized:
			if c.LastTransitionTime.IsZero() {
				t.Errorf("new condition without transition time: %+v", c)
			}
		}
	}
}

func TestPhase(t *testing.T) {
	term := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	}
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		set    func(c *container)
		want   corev1.PodPhase
	}{
		{"not started", corev1.RestartPolicyAlways, func(c *container) {}, corev1.PodPending},
		{"running", corev1.RestartPolicyAlways, func(c *container) { c.proc = &process{} }, corev1.PodRunning},
		{"crash loop", corev1.RestartPolicyAlways, func(c *container) { c.lastTerm = term(1).Terminated }, corev1.PodRunning},
		{"never, exit 0", corev1.RestartPolicyNever, func(c *container) { c.state, c.done = term(0), true }, corev1.PodSucceeded},
		{"never, exit 1", corev1.RestartPolicyNever, func(c *container) { c.state, c.done = term(1), true }, corev1.PodFailed},
		{"on failure, exit 0", corev1.RestartPolicyOnFailure, func(c *container) { c.state, c.done = term(0), true }, corev1.PodSucceeded},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tc.policy, Containers: []corev1.Container{{Name: "a"}}}}
		w := testWorker(pod)
		tc.set(w.main[0])
		if got := w.phase(pod); got != tc.want {
			t.Errorf("%s: phase = %s, want %s", tc.name, got, tc.want)
		}
	}
}
