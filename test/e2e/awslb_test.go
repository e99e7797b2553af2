//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
	"sluice.dev/sluice/test/load"
)

const (
	lbmName    = "awslb"
	lbmCluster = "e2e"
	secondHost = "www.second.test"
	thirdHost  = "third.test"
)

// TestAWSManagedLB runs managed mode end to end on one cluster: the
// controller creates the NLB, its TLS listener and target group in the
// AWS fake, finds ACM certificates for the Ingress hosts, and the load
// (https with SNI echo.test, 500 req/s) goes through the fake NLB's TLS
// listener to the proxies the binding reconciler registered:
//
//	load ─TLS─► awsfake managed NLB :443 (terminates TLS) ─► sluice proxy pods ─► echo pods
//	                  ▲ ELBv2 + ACM APIs (--aws-endpoint)
//	            sluice controller (--aws-cluster e2e)
//
// Each case's line gives created (create calls so far) and recreated (a
// load balancer, target group or listener ARN of the binding that
// changed since the first creation).
func TestAWSManagedLB(t *testing.T) {
	// sluice from its chart, with no binding of its own: the test creates
	// the managed binding, the IngressClass names it. The controller pods
	// reach the fake's API on the cluster bridge.
	var f *awsfake.Fake
	var certApp, certSecond, foreignTG string
	var foreignLB awsfake.LoadBalancerInfo
	h := installChart(t, "slm", chartOptions{lb: func(e *env) string {
		var err error
		f, err = awsfake.New(awsfake.Options{Speed: awsSpeed, Zones: []string{"zone-a", "zone-b"}, Address: net.JoinHostPort(e.c.BridgeIP().String(), "0")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		// Subnets found by tag (one per zone; the untagged one is not used).
		for _, sn := range []awsfake.Subnet{
			{ID: "subnet-0a", Zone: "zone-a", VPC: "vpc-e2e", Tags: map[string]string{"kubernetes.io/role/elb": "1"}},
			{ID: "subnet-0b", Zone: "zone-b", VPC: "vpc-e2e", Tags: map[string]string{"kubernetes.io/role/elb": "1"}},
			{ID: "subnet-0c", Zone: "zone-a", VPC: "vpc-e2e"},
		} {
			if err := f.AddSubnet(sn); err != nil {
				t.Fatal(err)
			}
		}
		certApp, _ = f.AddCertificate(awsfake.Certificate{Domain: appHost})
		certSecond, _ = f.AddCertificate(awsfake.Certificate{Domain: "second.test", SANs: []string{"*.second.test"}})
		// Something sluice did not create, tagged with the same cluster: it
		// must survive everything below.
		if foreignTG, err = f.AddTargetGroup(awsfake.TargetGroup{Name: "foreign", Tags: map[string]string{"sluice.dev/cluster": lbmCluster}}); err != nil {
			t.Fatal(err)
		}
		if foreignLB, err = f.AddLoadBalancer(awsfake.LoadBalancer{Name: "foreign", TargetGroups: []string{foreignTG}}); err != nil {
			t.Fatal(err)
		}
		return chartAWSValues(f.URL(), "--aws-cluster="+lbmCluster) + fmt.Sprintf(`bindings: []
ingressClasses: [{name: sluice, binding: %s}]
`, lbmName)
	}})
	e := h.env
	// The echo pods' readiness probe with a little slack: with one try of
	// one second, all three flap NotReady together when the shared machine
	// stalls, and the proxies then answer 503 (seen at load average 16),
	// which says nothing about the load balancer under test.
	echo := echoObjects()
	for _, o := range echo {
		if d, ok := o.(*appsv1.Deployment); ok {
			p := d.Spec.Template.Spec.Containers[0].ReadinessProbe
			p.TimeoutSeconds, p.FailureThreshold = 3, 3
		}
	}
	e.create(echo...)
	e.create(hostIngress("second", secondHost))
	// The API server's CEL rules refuse an inconsistent managed spec.
	for what, mut := range map[string]func(*v1alpha1.ManagedLoadBalancer){
		"an HTTP listener on a network load balancer": func(m *v1alpha1.ManagedLoadBalancer) { m.Listeners[0].Protocol = "HTTP" },
		"both subnets and subnet tags":                func(m *v1alpha1.ManagedLoadBalancer) { m.Subnets = []string{"subnet-0a"} },
		"a sluice.dev/ tag":                           func(m *v1alpha1.ManagedLoadBalancer) { m.Tags["sluice.dev/cluster"] = "x" },
	} {
		bad := managedBindingObject()
		bad.Name = "invalid"
		mut(bad.Spec.Provider.AWS.Managed)
		if err := e.cl.Create(context.Background(), bad); !apierrors.IsInvalid(err) {
			t.Errorf("%s: created (%v), want Invalid", what, err)
			_ = e.cl.Delete(context.Background(), bad)
		}
	}
	// The managed binding before the proxies: their readiness gate opens
	// once they are healthy in the target group sluice creates.
	e.create(managedBindingObject())
	e.settled(appNS, appName, 2*time.Minute)
	e.settled(proxyNS, proxyName, 3*time.Minute)
	var st v1alpha1.ManagedStatus
	e.eventually(60*time.Second, "the managed load balancer, target group and listener", func(ctx context.Context) (bool, error) {
		b, err := e.managedBinding(ctx)
		if err != nil || b.Status.Managed == nil {
			return false, err
		}
		st = *b.Status.Managed
		return st.LoadBalancerARN != "" && st.TargetGroupARN != "" && len(st.ListenerARNs) == 1, nil
	})
	addr, ok := f.ListenerAddress(st.LoadBalancerARN, 443)
	if !ok {
		t.Fatal("the managed listener carries no traffic")
	}
	_, port, _ := net.SplitHostPort(addr)
	e.lbPort, _ = strconv.Atoi(port)
	e.loadOpts = func(o *load.Options) {
		o.Target = "https://" + addr
		o.TLSConfig = &tls.Config{ServerName: appHost, InsecureSkipVerify: true} // the fake's certificates are self-signed stand-ins
	}
	e.eventually(90*time.Second, "a request through the managed NLB", func(context.Context) (bool, error) {
		code, cn, err := tlsGet(addr, appHost)
		return err == nil && code == 200 && cn == appHost, nil
	})
	first := st
	sdk := elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(f.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	// recreated is read from the fake, never from the binding's status:
	// create calls beyond the first load balancer, target group and
	// listener, delete calls, and resources of the first creation that
	// the fake no longer holds.
	createCalls := func(c map[string]int) int {
		return c["CreateLoadBalancer"] + c["CreateTargetGroup"] + c["CreateListener"]
	}
	deleteCalls := func(c map[string]int) int {
		return c["DeleteLoadBalancer"] + c["DeleteTargetGroup"] + c["DeleteListener"]
	}
	firstCreated := createCalls(f.Calls())
	gone := func() int {
		n := 0
		if !slices.Contains(f.LoadBalancerARNs(), first.LoadBalancerARN) {
			n++
		}
		if !slices.Contains(f.TargetGroupARNs(), first.TargetGroupARN) {
			n++
		}
		for _, l := range first.ListenerARNs {
			if _, _, ok := f.ListenerCertificates(l); !ok {
				n++
			}
		}
		return n
	}
	note := func(extra string) string {
		c := f.Calls()
		created := createCalls(c)
		recreated := created - firstCreated + deleteCalls(c) + gone()
		if recreated > 0 {
			t.Errorf("recreated %d: create calls %d (first %d), delete calls %d, first resources gone %d",
				recreated, created, firstCreated, deleteCalls(c), gone())
		}
		return strings.TrimSpace(fmt.Sprintf("created=%d recreated=%d %s", created, recreated, extra))
	}

	cs := newCases(e)
	cs.runNoted("awslb-create", func() string {
		// Certificates for both hosts, each served by SNI.
		def, others, _ := f.ListenerCertificates(first.ListenerARNs[0])
		got := append([]string{def}, others...)
		if !slices.Contains(got, certApp) || !slices.Contains(got, certSecond) || len(got) != 2 {
			t.Errorf("listener certificates %v, want %s and %s", got, certApp, certSecond)
		}
		for host, want := range map[string]string{appHost: appHost, secondHost: "second.test"} {
			if _, cn, err := tlsGet(addr, host); err != nil || cn != want {
				t.Errorf("%s served certificate %q (%v), want %q", host, cn, err, want)
			}
		}
		if c := f.Calls(); c["CreateLoadBalancer"] != 1 || c["CreateTargetGroup"] != 1 || c["CreateListener"] != 1 {
			t.Errorf("create calls %v, want one of each", c)
		}
		lbs, err := sdk.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: []string{first.LoadBalancerARN}})
		if err != nil || len(lbs.LoadBalancers) != 1 || len(lbs.LoadBalancers[0].AvailabilityZones) != 2 ||
			awssdk.ToString(lbs.LoadBalancers[0].AvailabilityZones[0].SubnetId) != "subnet-0a" ||
			awssdk.ToString(lbs.LoadBalancers[0].AvailabilityZones[1].SubnetId) != "subnet-0b" {
			t.Errorf("load balancer subnets: %+v (%v), want subnet-0a and subnet-0b (found by tag)", lbs, err)
		}
		return note(fmt.Sprintf("certificates=%d", len(got)))
	})
	cs.runNoted("awslb-traffic", func() string {
		var dns string
		e.eventually(120*time.Second, "the NLB name in Ingress status", func(ctx context.Context) (bool, error) {
			b, err := e.managedBinding(ctx)
			if err != nil || len(b.Status.Addresses) == 0 {
				return false, err
			}
			dns = b.Status.Addresses[0].Hostname
			var ing networkingv1.Ingress
			if err := e.cl.Get(ctx, client.ObjectKey{Namespace: appNS, Name: appName}, &ing); err != nil {
				return false, err
			}
			lbs := ing.Status.LoadBalancer.Ingress
			return strings.HasPrefix(dns, lbmName) && strings.HasSuffix(dns, ".elb.us-east-1.amazonaws.com") &&
				b.Status.Addresses[0].CanonicalHostedZoneID == "Z26RNL4JYFTOTI" && len(lbs) == 1 && lbs[0].Hostname == dns, nil
		})
		time.Sleep(5 * time.Second) // a full slice of load through the listener
		return note("ingress_hostname=" + dns)
	})
	cs.runNoted("awslb-third-cert", func() string {
		defBefore, _, _ := f.ListenerCertificates(first.ListenerARNs[0])
		certThird, _ := f.AddCertificate(awsfake.Certificate{Domain: thirdHost})
		e.create(hostIngress("third", thirdHost))
		e.eventually(60*time.Second, "the third certificate on the listener", func(context.Context) (bool, error) {
			def, others, _ := f.ListenerCertificates(first.ListenerARNs[0])
			return slices.Contains(append(others, def), certThird), nil
		})
		if def, _, _ := f.ListenerCertificates(first.ListenerARNs[0]); def != defBefore {
			t.Errorf("the default certificate moved from %s to %s", defBefore, def)
		}
		if _, cn, err := tlsGet(addr, thirdHost); err != nil || cn != thirdHost {
			t.Errorf("%s served certificate %q (%v)", thirdHost, cn, err)
		}
		return note("certificates=3")
	})
	cs.runNoted("awslb-proxy-roll", func() string {
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 2*time.Minute)
		return note("")
	})
	cs.runNoted("awslb-controller-restart", func() string {
		before := f.Calls()
		h.restartControllers()
		e.eventually(60*time.Second, "the restarted controller to read the load balancers", func(context.Context) (bool, error) {
			return f.Calls()["DescribeLoadBalancers"] > before["DescribeLoadBalancers"]+1, nil
		})
		time.Sleep(3 * time.Second) // let it finish a full round
		after := f.Calls()
		for _, k := range []string{"CreateLoadBalancer", "CreateTargetGroup", "CreateListener", "DeleteLoadBalancer", "DeleteTargetGroup", "DeleteListener"} {
			if after[k] != before[k] {
				t.Errorf("restart: %s %d → %d", k, before[k], after[k])
			}
		}
		return note(fmt.Sprintf("load_balancers=%d target_groups=%d", len(f.LoadBalancerARNs()), len(f.TargetGroupARNs())))
	})
	cs.runNoted("awslb-delay", func() string {
		b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: lbmName}}
		if err := e.update(b, func() {
			b.Spec.Provider.AWS.Managed.TargetGroupAttributes.DeregistrationDelaySeconds = awssdk.Int32(20)
		}); err != nil {
			t.Fatal(err)
		}
		e.eventually(60*time.Second, "deregistration delay 20s on the same target group", func(ctx context.Context) (bool, error) {
			out, err := sdk.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: awssdk.String(first.TargetGroupARN)})
			if err != nil {
				return false, err
			}
			for _, a := range out.Attributes {
				if awssdk.ToString(a.Key) == "deregistration_delay.timeout_seconds" {
					return awssdk.ToString(a.Value) == "20", nil
				}
			}
			return false, nil
		})
		return note(fmt.Sprintf("modified=%d", f.Calls()["ModifyTargetGroupAttributes"]))
	})

	// Deletion: no load (the load balancer is meant to go away).
	if cs.wants("awslb-delete") {
		start := time.Now()
		if err := e.cl.Delete(context.Background(), managedBindingObject()); err != nil {
			t.Fatal(err)
		}
		// The proxies still run: the safety floor holds the deletion of a
		// binding whose pods exist until it is confirmed (with the
		// generation the deletion gave it).
		b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: lbmName}}
		if err := e.update(b, func() {
			b.Annotations = map[string]string{v1alpha1.AnnotationConfirmDeregister: strconv.FormatInt(b.Generation, 10)}
		}); err != nil {
			t.Fatal(err)
		}
		e.eventually(2*time.Minute, "the binding gone", func(ctx context.Context) (bool, error) {
			_, err := e.managedBinding(ctx)
			return apierrors.IsNotFound(err), nil
		})
		lbs, tgs := f.LoadBalancerARNs(), f.TargetGroupARNs()
		if !slices.Equal(lbs, []string{foreignLB.ARN}) || !slices.Equal(tgs, []string{foreignTG}) {
			t.Errorf("after deletion: load balancers %v, target groups %v; want only the foreign ones", lbs, tgs)
		}
		c := f.Calls()
		// No load: the deletion takes the listener away.
		e.summary(fmt.Sprintf("e2e awslb-delete: requests=0 failed=0 created=%d recreated=%d deleted=%d left_foreign=%d seconds=%.0f",
			createCalls(c), createCalls(c)-firstCreated, deleteCalls(c), len(lbs)+len(tgs), time.Since(start).Seconds()))
	}
}

// managedBindingObject is the managed binding of the proxies: an NLB with
// a TLS listener on 443, health checks and timings scaled like the other
// AWS cases (the fake divides them by awsSpeed).
func managedBindingObject() *v1alpha1.LoadBalancerBinding {
	gate := true
	return &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: lbmName},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector:   metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": proxyName}},
			Port:       intstr.FromString("http"),
			TargetType: v1alpha1.TargetIP,
			Provider: v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{Managed: &v1alpha1.ManagedLoadBalancer{
				Type: "network", Scheme: "internet-facing", SubnetTags: map[string]string{"kubernetes.io/role/elb": "1"},
				Listeners:             []v1alpha1.ManagedListener{{Port: 443, Protocol: "TLS"}},
				HealthCheck:           v1alpha1.ManagedHealthCheck{Path: "/healthz", IntervalSeconds: 10, HealthyThreshold: 2, UnhealthyThreshold: 2},
				TargetGroupAttributes: &v1alpha1.TargetGroupAttributes{DeregistrationDelaySeconds: awssdk.Int32(30)},
				Tags:                  map[string]string{"team": "e2e"},
			}}},
			ReadinessGate: &gate,
			Drain:         v1alpha1.DrainSpec{Handshake: &gate},
		},
	}
}

func (e *env) managedBinding(ctx context.Context) (*v1alpha1.LoadBalancerBinding, error) {
	var b v1alpha1.LoadBalancerBinding
	err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: lbmName}, &b)
	return &b, err
}

// hostIngress routes host to the echo service, in the sluice class.
func hostIngress(name, host string) *networkingv1.Ingress {
	class := "sluice"
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: appName, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}},
			}}}},
		},
	}
}

// tlsGet sends one request through a TLS listener with SNI host and
// returns the status and the served certificate's common name.
func tlsGet(addr, host string) (int, string, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+addr+"/", nil)
	req.Host = host
	resp, err := (&http.Client{Transport: tr, Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return resp.StatusCode, "", errors.New("no peer certificate")
	}
	return resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName, nil
}
