package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
)

// twoZones stores a snapshot of binding b: zone-a holds a1 and a2
// (healthy), zone-b holds b1 (healthy) and b2 (initial).
func twoZones(t *testing.T) (*Handler, client.Client) {
	t.Helper()
	c := ct.NewClient(interceptor.Funcs{}, ct.Binding("b"))
	store := snapshot.NewStore()
	snap := &snapshot.Snapshot{Binding: types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, Pods: map[string]snapshot.PodTarget{}}
	g := snapshot.Group{Name: ct.Backend, Synced: true}
	for i, p := range []struct {
		name, zone string
		st         lb.State
	}{{"a1", "zone-a", lb.Healthy}, {"a2", "zone-a", lb.Healthy}, {"b1", "zone-b", lb.Healthy}, {"b2", "zone-b", lb.Initial}} {
		tg := lb.Target{Address: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 0, byte(i + 1)}), 8080), Zone: p.zone}
		snap.Pods[p.name] = snapshot.PodTarget{Target: tg, HasTarget: true, Desired: true}
		g.Targets = append(g.Targets, lb.Status{Target: tg, State: p.st})
	}
	snap.Groups = []snapshot.Group{g}
	store.Put(snap)
	return &Handler{Client: c, Store: store}, c
}

func review(pod, sub string) []byte {
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u-1", Name: pod, Namespace: ct.Namespace, Operation: admissionv1.Create,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: sub},
	}
	b, _ := json.Marshal(r)
	return b
}

func post(t *testing.T, h http.Handler, body []byte) (int, *admissionv1.AdmissionReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return rec.Code, &out
}

func TestEvictionDecisions(t *testing.T) {
	h, _ := twoZones(t)
	for _, tc := range []struct {
		pod, sub string
		allowed  bool
	}{
		{"a1", "eviction", true},  // zone-a keeps a2
		{"b1", "eviction", false}, // zone-b's only healthy target
		{"b2", "eviction", true},  // not healthy
		{"other", "eviction", true},
		{"b1", "", true}, // not an eviction
	} {
		code, out := post(t, h, review(tc.pod, tc.sub))
		if code != http.StatusOK || out.Response == nil || out.Response.UID != "u-1" {
			t.Fatalf("%s: %d %+v", tc.pod, code, out)
		}
		if out.Response.Allowed != tc.allowed {
			t.Errorf("%s %s: allowed %v", tc.pod, tc.sub, out.Response.Allowed)
		}
		if !tc.allowed && (out.Response.Result.Code != http.StatusTooManyRequests || out.Response.Result.Reason != metav1.StatusReasonTooManyRequests) {
			t.Errorf("%s: refusal %+v", tc.pod, out.Response.Result)
		}
	}
}

func TestEvictionFloorOff(t *testing.T) {
	h, c := twoZones(t)
	var b v1alpha1.LoadBalancerBinding
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &b); err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	b.Spec.ZoneFloor = &zero
	if err := c.Update(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if _, out := post(t, h, review("b1", "eviction")); !out.Response.Allowed {
		t.Fatal("refused with the floor off")
	}
}

func TestBadReviews(t *testing.T) {
	h, _ := twoZones(t)
	for _, body := range []string{"", "{", `{"request":null}`, `{"request":{"uid":""}}`} {
		if code, _ := post(t, h, []byte(body)); code != http.StatusBadRequest {
			t.Errorf("%q: %d", body, code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}

func FuzzReview(f *testing.F) {
	f.Add(review("b1", "eviction"))
	f.Add([]byte(`{"request":{"uid":"x","name":"b1","namespace":"ingress","operation":"CREATE","resource":{"resource":"pods"},"subResource":"eviction"}}`))
	f.Add([]byte(`{"request":{"uid":"x"}}`))
	h, _ := twoZones(&testing.T{})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

func TestCertsRenewAndPersist(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &certs{dir: dir, hosts: []string{"127.0.0.1", "sluice.sluice-system.svc"}, now: func() time.Time { return now }}
	if changed, err := c.renew(); err != nil || !changed {
		t.Fatalf("first renew: %v %v", changed, err)
	}
	ca := c.bundle()
	// A new process with the same dir reuses them.
	c2 := &certs{dir: dir, hosts: c.hosts, now: c.now}
	if changed, err := c2.renew(); err != nil || changed || !bytes.Equal(c2.bundle(), ca) {
		t.Fatalf("reload: changed %v err %v", changed, err)
	}
	// Two thirds into the leaf's life: a new leaf, same CA.
	leaf := c2.leaf
	now = now.Add(61 * 24 * time.Hour)
	if changed, err := c2.renew(); err != nil || changed || c2.leaf == leaf {
		t.Fatalf("leaf renewal: changed %v err %v same leaf %v", changed, err, c2.leaf == leaf)
	}
	// Two thirds into the CA's life: a new CA (to inject).
	now = now.Add(250 * 24 * time.Hour)
	if changed, err := c2.renew(); err != nil || !changed || bytes.Equal(c2.bundle(), ca) {
		t.Fatalf("CA renewal: changed %v err %v", changed, err)
	}
	// Other hosts: the saved leaf is not reused.
	c3 := &certs{dir: dir, hosts: []string{"other.example"}, now: c.now}
	c3.load()
	if c3.leaf != nil {
		t.Fatal("leaf for other hosts reused")
	}
}

func TestServerConfiguresAndServes(t *testing.T) {
	h, c := twoZones(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := New(Options{Address: addr, Hosts: []string{"127.0.0.1"}, URL: "https://" + addr, Client: c, Handler: h,
		CreateConfigurations: true, Namespaces: []string{ct.Namespace}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); <-done }()

	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	deadline := time.Now().Add(30 * time.Second)
	for c.Get(context.Background(), client.ObjectKey{Name: "sluice-eviction-floor"}, &cfg) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no webhook configuration")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := cfg.Webhooks[0]
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.ClientConfig.URL != "https://"+addr+Path || w.Rules[0].Resources[0] != "pods/eviction" ||
		w.NamespaceSelector == nil || w.NamespaceSelector.MatchExpressions[0].Values[0] != ct.Namespace {
		t.Fatalf("webhook %+v", w)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(w.ClientConfig.CABundle) {
		t.Fatal("caBundle holds no certificate")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var resp *http.Response
	for {
		resp, err = hc.Post(*w.ClientConfig.URL, "application/json", bytes.NewReader(review("b1", "eviction")))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response.Allowed {
		t.Fatalf("over TLS: %+v %v", out.Response, err)
	}
}

func TestClientConfig(t *testing.T) {
	for _, tc := range []struct {
		url, svc string
		ok       bool
	}{
		{"https://127.0.0.1:9443", "", true},
		{"http://127.0.0.1:9443", "", false},
		{"", "sluice-system/sluice-controller", true},
		{"", "sluice-system/sluice-controller:9443", true},
		{"", "sluice-controller", false},
		{"", "ns/name:0", false},
		{"", "ns/name:9443x", false},
		{"", "ns/a/b", false},
	} {
		if _, err := clientConfig(tc.url, tc.svc, nil, Path); (err == nil) != tc.ok {
			t.Errorf("%q %q: %v", tc.url, tc.svc, err)
		}
	}
}
