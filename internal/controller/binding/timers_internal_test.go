package binding

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestTimersCheck(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		t    Timers
		ok   bool
		want []string
	}{
		{"unknown provider", Timers{DrainTimeout: 5 * time.Minute}, true, []string{"not known"}},
		{"all fit", Timers{ProviderDrain: 45 * s, ProviderDrainKnown: true, DrainTimeout: 300 * s, DrainMaxWait: 60 * s, DrainMaxWaitKnown: true, Grace: 90 * s, GraceKnown: true},
			true, []string{"up to 45s", "drain.timeout 5m0s", "--drain-max-wait 1m0s", "terminationGracePeriodSeconds 1m30s", "all fit"}},
		{"aws default delay", Timers{ProviderDrain: 315 * s, ProviderDrainKnown: true, DrainTimeout: 300 * s, DrainMaxWait: 60 * s, DrainMaxWaitKnown: true, Grace: 30 * s, GraceKnown: true},
			false, []string{"up to 5m15s", "drain.timeout 5m0s is shorter", "--drain-max-wait 1m0s is shorter", "terminationGracePeriodSeconds 30s is shorter"}},
		{"only the proxy", Timers{ProviderDrain: 90 * s, ProviderDrainKnown: true, DrainTimeout: 300 * s, DrainMaxWait: 60 * s, DrainMaxWaitKnown: true},
			false, []string{"--drain-max-wait 1m0s is shorter"}},
		{"haproxy", Timers{ProviderDrainKnown: true, DrainTimeout: 300 * s}, true, []string{"up to 0s", "all fit"}},
		{"grace under the proxy's wait", Timers{ProviderDrainKnown: true, DrainTimeout: 300 * s, DrainMaxWait: 60 * s, DrainMaxWaitKnown: true, Grace: 30 * s, GraceKnown: true},
			false, []string{"terminationGracePeriodSeconds 30s is shorter than the proxy's --drain-max-wait 1m0s"}},
	} {
		ok, msg := tc.t.Check()
		if ok != tc.ok {
			t.Errorf("%s: ok %v: %s", tc.name, ok, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
	}
}

func TestDrainMaxWait(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		d    time.Duration
		ok   bool
	}{
		{[]string{"sluice", "proxy"}, 60 * time.Second, true},
		{[]string{"/sluice", "proxy", "--drain-max-wait=90s"}, 90 * time.Second, true},
		{[]string{"proxy", "-drain-max-wait", "2m"}, 2 * time.Minute, true},
		{[]string{"proxy", "--drain-max-wait"}, 0, false},
		{[]string{"proxy", "--drain-max-wait=soon"}, 0, false},
		{[]string{"proxy", "--drain-max-wait=-1s"}, 0, true},
		{[]string{"sluice", "controller"}, 0, false},
		{nil, 0, false},
	} {
		d, ok := proxyDrainMaxWait(tc.argv)
		if ok != tc.ok || (ok && d != tc.d) {
			t.Errorf("%q: %v %v, want %v %v", tc.argv, d, ok, tc.d, tc.ok)
		}
	}
	pods := []*corev1.Pod{
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Command: []string{"sluice"}, Args: []string{"proxy", "--drain-max-wait=2m"}}}}},
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Args: []string{"proxy", "--drain-max-wait=30s"}}, {Args: []string{"sidecar"}}}}},
	}
	if d, ok := drainMaxWait(pods); !ok || d != 30*time.Second {
		t.Fatalf("shortest over pods: %v %v", d, ok)
	}
}

func FuzzProxyDrainMaxWait(f *testing.F) {
	f.Add("proxy --drain-max-wait=90s")
	f.Add("proxy -drain-max-wait 2m")
	f.Add("proxy --drain-max-wait")
	f.Fuzz(func(t *testing.T, line string) {
		d, ok := proxyDrainMaxWait(strings.Fields(line))
		if ok && d < 0 {
			t.Fatalf("negative wait %v", d)
		}
	})
}
