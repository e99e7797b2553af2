//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFleetClassesAndEndpointChecks runs two real proxies on one manifests
// directory with two IngressClasses of sluice's controller: each serves
// only the class it is given (the other class's host answers 404, never a
// route), and both refuse endpoints that are not a Pod of the Service's
// namespace (the route stays and answers 503) and count them in
// sluice_endpoints_refused.
func TestFleetClassesAndEndpointChecks(t *testing.T) {
	e := newEnv(t)
	p := e.pool("app", 1)
	p.start(0)
	forged := sliceYAML("forged", "forged-slice", p.port, nil) +
		fmt.Sprintf("- addresses: [%q]\n  targetRef: {kind: Pod, namespace: other, name: app-0}\n", p.ips[0]) +
		fmt.Sprintf("- addresses: [%q]\n", p.ips[0])
	forged = replaceOnce(t, forged, "endpoints: []\n", "endpoints:\n")
	internal := replaceOnce(t, ingressYAML("admin", "admin.test", rule{"/", "app"}), "ingressClassName: sluice\n", "ingressClassName: sluice-internal\n")
	e.write("objects.yaml", docs(
		ingressClassYAML,
		replaceOnce(t, ingressClassYAML, "name: sluice\n", "name: sluice-internal\n"),
		serviceYAML("app"), p.slice([]int{0}),
		serviceYAML("forged"), forged,
		ingressYAML("app", "app.test", rule{"/", "app"}),
		ingressYAML("forged", "forged.test", rule{"/", "forged"}),
		internal,
	))

	public := e.startProxy("public")
	private := e.startProxy("internal", "--ingress-class", "sluice-internal")
	for _, tc := range []struct {
		sp   *sluiceProxy
		host string
		want int
	}{
		{public, "app.test", 200},
		{public, "admin.test", 404},
		{public, "forged.test", 503},
		{private, "admin.test", 200},
		{private, "app.test", 404},
		{private, "forged.test", 404},
	} {
		if err := pollStatus(fmt.Sprintf("http://127.0.0.1:%d/", tc.sp.http), tc.host, tc.want, 5*time.Second); err != nil {
			t.Errorf("%s proxy: %v", tc.sp.name, err)
		}
	}
	// Only the public proxy routes to the forged Service.
	for sp, want := range map[*sluiceProxy]float64{public: 2, private: 0} {
		if got, err := sp.metric("sluice_endpoints_refused"); err != nil || got != want {
			t.Errorf("%s proxy: sluice_endpoints_refused = %v (%v), want %v", sp.name, got, err, want)
		}
	}
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q is not once in %q", old, s)
	}
	return strings.Replace(s, old, new, 1)
}
