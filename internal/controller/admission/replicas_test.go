package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
)

// A replica that does not lead (its store empty, no reconcile run) answers
// every eviction and steering review as the leader does, from the
// snapshot it builds from the same API objects and load balancer.
func TestNonLeaderAnswersAsLeader(t *testing.T) {
	c := ct.NewClient(interceptor.Funcs{}, ct.Binding("b"), ct.Node("node-a", "zone-a"), ct.Node("node-b", "zone-b"),
		ct.Pod("a1", "10.244.1.1", ct.OnNode("node-a")), ct.Pod("a2", "10.244.1.2", ct.OnNode("node-a")),
		ct.Pod("b1", "10.244.2.1", ct.OnNode("node-b")), ct.Pod("b2", "10.244.2.2", ct.OnNode("node-b")))
	p := ct.NewProvider()
	newReconciler := func(store *snapshot.Store) *binding.Reconciler {
		r, err := binding.New(binding.Options{Client: c, Providers: ct.Providers{P: p}, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	leaderStore := snapshot.NewStore()
	leader := newReconciler(leaderStore)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ct.Namespace, Name: "b"}}
	if _, err := leader.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	p.SetHealth(ct.Backend, ct.Target("10.244.2.2"), lb.Unhealthy, "L7STS 503")
	p.Step()
	if _, err := leader.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	follower := newReconciler(snapshot.NewStore()) // another replica: nothing stored
	handlers := map[string]*Handler{
		"leader":   {Client: c, Store: leaderStore},
		"follower": {Client: c, Snapshots: follower.View},
	}
	refused := 0
	for _, pod := range []string{"a1", "a2", "b1", "b2", "other"} {
		answers := map[string]bool{}
		for name, h := range handlers {
			code, out := post(t, h, review(pod, "eviction"))
			if code != http.StatusOK || out.Response == nil {
				t.Fatalf("%s, eviction of %s: %d %+v", name, pod, code, out)
			}
			answers[name] = out.Response.Allowed
		}
		if answers["leader"] != answers["follower"] {
			t.Errorf("eviction of %s: leader allowed %v, follower %v", pod, answers["leader"], answers["follower"])
		}
		if !answers["leader"] {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d evictions refused, want 1 (b1, zone-b's only healthy target)", refused)
	}
	surge := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ct.Namespace, GenerateName: "proxy-new-",
		Labels: map[string]string{"app": "sluice", "pod-template-hash": "new"}}}
	var patches [][]byte
	for _, s := range []*Steer{{Client: c, Store: leaderStore}, {Client: c, Snapshots: follower.View}} {
		code, out := post(t, s, podReview(t, surge))
		if code != http.StatusOK || out.Response == nil {
			t.Fatalf("steering: %d %+v", code, out)
		}
		patches = append(patches, out.Response.Patch)
	}
	if len(patches[0]) == 0 || !reflect.DeepEqual(patches[0], patches[1]) {
		t.Errorf("steering patches: leader %s, follower %s; want the same, not empty", patches[0], patches[1])
	}
}

// Two replicas serving at once each keep their CA in the caBundles, so the
// API server verifies whichever the Service picks.
func TestReplicasShareTheCABundle(t *testing.T) {
	h, _ := twoZones(t)
	v, m := chartConfigurations()
	c := ct.NewClient(interceptor.Funcs{}, v, m)
	var addrs []string
	for range 2 {
		addr := freeAddr(t)
		addrs = append(addrs, addr)
		s, err := New(Options{Address: addr, Hosts: []string{"127.0.0.1"}, Service: "sluice-system/sluice-controller-webhook",
			ConfigName: v.Name, SteerConfigName: m.Name, Client: c, Handler: h, Steer: http.NotFoundHandler()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	count := func(b []byte) int {
		n := 0
		for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
			n++
		}
		return n
	}
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	waitFor(t, "both CAs in both caBundles", func() bool {
		return errors.Join(c.Get(context.Background(), client.ObjectKey{Name: v.Name}, &gotV), c.Get(context.Background(), client.ObjectKey{Name: m.Name}, &gotM)) == nil &&
			count(gotV.Webhooks[0].ClientConfig.CABundle) == 2 && count(gotM.Webhooks[0].ClientConfig.CABundle) == 2
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(gotV.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("caBundle unreadable")
	}
	for _, addr := range addrs {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Errorf("replica at %s not verified with the caBundle: %v", addr, err)
			continue
		}
		_ = conn.Close()
	}
}

// Rechecks write nothing while the configurations hold what they should
// (CreateConfigurations: no Update per recheck).
func TestRecheckWritesNothingUnchanged(t *testing.T) {
	h, _ := twoZones(t)
	var calls apiCalls
	c := ct.NewClient(calls.funcs())
	addr := freeAddr(t)
	s, err := New(Options{Address: addr, Hosts: []string{"127.0.0.1"}, URL: "https://" + addr, Client: c, Handler: h,
		Steer: http.NotFoundHandler(), CreateConfigurations: true, RecheckEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "both configurations created", func() bool { return calls.creates.Load() == 2 })
	after := calls.gets.Load()
	waitFor(t, "ten rechecks", func() bool { return calls.gets.Load() >= after+20 })
	if n := calls.updates.Load(); n != 0 {
		t.Errorf("%d updates on rechecks of unchanged configurations, want 0", n)
	}
}
