package awsfake

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	acmtypes "github.com/aws/aws-sdk-go-v2/service/acm/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
)

func acmSDK(f *Fake) *acm.Client {
	return acm.New(acm.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(f.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      connectionRetries(),
	})
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return fmt.Sprint(err)
}

func TestACM(t *testing.T) {
	f := start(t, 1)
	ctx := context.Background()
	exp := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	a, _ := f.AddCertificate(Certificate{Domain: "a.example.com", SANs: []string{"*.a.example.com"}, NotAfter: exp})
	_, _ = f.AddCertificate(Certificate{Domain: "b.example.com", Status: "PENDING_VALIDATION"})
	c := acmSDK(f)
	out, err := c.ListCertificates(ctx, &acm.ListCertificatesInput{CertificateStatuses: []acmtypes.CertificateStatus{acmtypes.CertificateStatusIssued}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.CertificateSummaryList) != 1 {
		t.Fatalf("issued: %+v", out.CertificateSummaryList)
	}
	s := out.CertificateSummaryList[0]
	if aws.ToString(s.CertificateArn) != a || !slices.Equal(s.SubjectAlternativeNameSummaries, []string{"a.example.com", "*.a.example.com"}) ||
		s.Status != acmtypes.CertificateStatusIssued || !aws.ToTime(s.NotAfter).Equal(exp) {
		t.Fatalf("summary %+v", s)
	}
	all, err := c.ListCertificates(ctx, &acm.ListCertificatesInput{MaxItems: aws.Int32(1)})
	if err != nil || len(all.CertificateSummaryList) != 1 || all.NextToken == nil {
		t.Fatalf("page 1: %+v %v", all, err)
	}
	d, err := c.DescribeCertificate(ctx, &acm.DescribeCertificateInput{CertificateArn: &a})
	if err != nil || aws.ToString(d.Certificate.DomainName) != "a.example.com" || len(d.Certificate.SubjectAlternativeNames) != 2 {
		t.Fatalf("describe %+v %v", d, err)
	}
	_, err = c.DescribeCertificate(ctx, &acm.DescribeCertificateInput{CertificateArn: aws.String(a + "x")})
	var nf *acmtypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("unknown certificate: %v", err)
	}
}

// TestManagedLifecycle drives create, modify and delete of a load
// balancer, target group and TLS listener through the SDK, with traffic
// through the listener and AWS's errors on the way.
func TestManagedLifecycle(t *testing.T) {
	f := start(t, 100)
	ctx := context.Background()
	c := sdk(f)
	certA, _ := f.AddCertificate(Certificate{Domain: "a.example.com"})
	certB, _ := f.AddCertificate(Certificate{Domain: "*.b.example.com"})
	tags := []types.Tag{{Key: aws.String("sluice.dev/cluster"), Value: aws.String("c1")}}

	lbOut, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web"), Type: types.LoadBalancerTypeEnumNetwork,
		Scheme: types.LoadBalancerSchemeEnumInternal, Subnets: []string{"subnet-1", "subnet-2"}, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	l := lbOut.LoadBalancers[0]
	lbARN := aws.ToString(l.LoadBalancerArn)
	if !strings.HasPrefix(aws.ToString(l.DNSName), "internal-web-") || aws.ToString(l.CanonicalHostedZoneId) != "Z26RNL4JYFTOTI" || len(l.AvailabilityZones) != 2 {
		t.Fatalf("load balancer %+v", l)
	}
	_, err = c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web"), Type: types.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-1"}})
	if code(err) != "DuplicateLoadBalancerName" {
		t.Fatalf("duplicate name: %v", err)
	}
	tgOut, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("web-tg"), Protocol: types.ProtocolEnumTcp, Port: aws.Int32(8080),
		VpcId: aws.String("vpc-1"), TargetType: types.TargetTypeEnumIp, HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckPath: aws.String("/"), Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	tgARN := aws.ToString(tgOut.TargetGroups[0].TargetGroupArn)
	if _, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: &lbARN, Port: aws.Int32(443), Protocol: types.ProtocolEnumTls,
		DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: &tgARN}}}); code(err) != "CertificateNotFound" {
		t.Fatalf("TLS listener without a certificate: %v", err)
	}
	lnOut, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: &lbARN, Port: aws.Int32(443), Protocol: types.ProtocolEnumTls,
		Certificates:   []types.Certificate{{CertificateArn: &certA}},
		DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: &tgARN}}, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	lnARN := aws.ToString(lnOut.Listeners[0].ListenerArn)
	if _, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: &lbARN, Port: aws.Int32(443), Protocol: types.ProtocolEnumTcp,
		DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: &tgARN}}}); code(err) != "DuplicateListener" {
		t.Fatalf("second listener on 443: %v", err)
	}
	if _, err := c.AddListenerCertificates(ctx, &elbv2.AddListenerCertificatesInput{ListenerArn: &lnARN, Certificates: []types.Certificate{{CertificateArn: &certB}}}); err != nil {
		t.Fatal(err)
	}
	lc, err := c.DescribeListenerCertificates(ctx, &elbv2.DescribeListenerCertificatesInput{ListenerArn: &lnARN})
	if err != nil || len(lc.Certificates) != 2 || !aws.ToBool(lc.Certificates[0].IsDefault) || aws.ToString(lc.Certificates[1].CertificateArn) != certB {
		t.Fatalf("listener certificates %+v %v", lc, err)
	}
	var many []types.Certificate
	for i := range maxListenerCertificates {
		arn, _ := f.AddCertificate(Certificate{Domain: fmt.Sprintf("h%d.example.com", i)})
		many = append(many, types.Certificate{CertificateArn: aws.String(arn)})
	}
	if _, err := c.AddListenerCertificates(ctx, &elbv2.AddListenerCertificatesInput{ListenerArn: &lnARN, Certificates: many}); code(err) != "TooManyCertificates" {
		t.Fatalf("26 certificates: %v", err)
	}

	// Traffic: TLS terminated with the certificate for the SNI name.
	backend := named(t, "pod")
	if _, err := c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &tgARN, Targets: []types.TargetDescription{desc(backend)}}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, f, tgARN, stateHealthy)
	addr, ok := f.ListenerAddress(lbARN, 443)
	if !ok {
		t.Fatal("no listener address")
	}
	for host, want := range map[string]string{"x.b.example.com": "*.b.example.com", "a.example.com": "a.example.com", "other.example.org": "a.example.com"} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.TLS.PeerCertificates[0].Subject.CommonName; got != want || string(body) != "pod" {
			t.Errorf("%s: certificate %s body %q, want %s and pod", host, got, body, want)
		}
		tr.CloseIdleConnections()
	}

	// Modify in place.
	if _, err := c.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: &tgARN,
		Attributes: []types.TargetGroupAttribute{{Key: aws.String("deregistration_delay.timeout_seconds"), Value: aws.String("17")},
			{Key: aws.String("proxy_protocol_v2.enabled"), Value: aws.String("true")}}}); err != nil {
		t.Fatal(err)
	}
	attrs, _ := c.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: &tgARN})
	got := map[string]string{}
	for _, a := range attrs.Attributes {
		got[aws.ToString(a.Key)] = aws.ToString(a.Value)
	}
	if got["deregistration_delay.timeout_seconds"] != "17" || got["proxy_protocol_v2.enabled"] != "true" {
		t.Fatalf("attributes %v", got)
	}
	if _, err := c.ModifyTargetGroup(ctx, &elbv2.ModifyTargetGroupInput{TargetGroupArn: &tgARN, HealthyThresholdCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{lbARN, lnARN}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatal(err)
	}
	td, err := c.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{lbARN, lnARN, tgARN}})
	if err != nil || len(td.TagDescriptions) != 3 || len(td.TagDescriptions[0].Tags) != 2 || len(td.TagDescriptions[1].Tags) != 2 {
		t.Fatalf("tags %+v %v", td, err)
	}
	tgs, _ := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{tgARN}})
	if !slices.Equal(tgs.TargetGroups[0].LoadBalancerArns, []string{lbARN}) || aws.ToInt32(tgs.TargetGroups[0].HealthyThresholdCount) != 2 {
		t.Fatalf("group %+v", tgs.TargetGroups[0])
	}

	// Delete: the group is in use until its listener is gone.
	if _, err := c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: &tgARN}); code(err) != "ResourceInUse" {
		t.Fatalf("deleting a group in use: %v", err)
	}
	ls, err := c.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: &lbARN})
	if err != nil || len(ls.Listeners) != 1 || ls.Listeners[0].Protocol != types.ProtocolEnumTls {
		t.Fatalf("listeners %+v %v", ls, err)
	}
	if _, err := c.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: &lnARN}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.ListenerAddress(lbARN, 443); ok {
		t.Error("listener still carries traffic")
	}
	if _, err := c.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: &lbARN}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: &tgARN}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: []string{lbARN}}); code(err) != "LoadBalancerNotFound" {
		t.Fatalf("deleted load balancer: %v", err)
	}
}

// TestALBListener: an HTTP listener of an application load balancer
// carries requests to an HTTP target group.
func TestALBListener(t *testing.T) {
	f := start(t, 100)
	ctx := context.Background()
	c := sdk(f)
	lbOut, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("alb"), Subnets: []string{"subnet-1", "subnet-2"}})
	if err != nil {
		t.Fatal(err)
	}
	lbARN := aws.ToString(lbOut.LoadBalancers[0].LoadBalancerArn)
	tcp, _ := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("tcp"), Protocol: types.ProtocolEnumTcp, Port: aws.Int32(80), TargetType: types.TargetTypeEnumIp})
	if _, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: &lbARN, Port: aws.Int32(80), Protocol: types.ProtocolEnumHttp,
		DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: tcp.TargetGroups[0].TargetGroupArn}}}); code(err) != "IncompatibleProtocols" {
		t.Fatalf("TCP group behind an ALB: %v", err)
	}
	tgOut, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("http"), Protocol: types.ProtocolEnumHttp, Port: aws.Int32(80),
		TargetType: types.TargetTypeEnumIp, HealthCheckIntervalSeconds: aws.Int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	tgARN := aws.ToString(tgOut.TargetGroups[0].TargetGroupArn)
	if _, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: &lbARN, Port: aws.Int32(80), Protocol: types.ProtocolEnumHttp,
		DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: &tgARN}}}); err != nil {
		t.Fatal(err)
	}
	backend := named(t, "alb-pod")
	if _, err := c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &tgARN, Targets: []types.TargetDescription{desc(backend)}}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, f, tgARN, stateHealthy)
	addr, _ := f.ListenerAddress(lbARN, 80)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "alb-pod" {
		t.Fatalf("body %q", body)
	}
}

// waitAll waits until every target of a group is in state.
func waitAll(t *testing.T, f *Fake, arn, state string) {
	t.Helper()
	for range 2000 {
		ts := f.Targets(arn)
		if len(ts) > 0 && !slices.ContainsFunc(ts, func(x TargetState) bool { return x.State != state }) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("targets of %s never %s: %+v", arn, state, f.Targets(arn))
}

func FuzzManagedAPI(f *testing.F) {
	for _, s := range []string{
		"Action=CreateLoadBalancer&Version=2015-12-01&Name=x&Type=network&Subnets.member.1=s&Tags.member.1.Key=k&Tags.member.1.Value=v",
		"Action=CreateTargetGroup&Version=2015-12-01&Name=t&Protocol=TCP&Port=80&TargetType=ip&HealthCheckIntervalSeconds=5",
		"Action=CreateListener&Version=2015-12-01&LoadBalancerArn=LB&Port=443&Protocol=TLS&Certificates.member.1.CertificateArn=CERT&DefaultActions.member.1.Type=forward&DefaultActions.member.1.TargetGroupArn=TG",
		"Action=ModifyListener&Version=2015-12-01&ListenerArn=LN&Protocol=TCP",
		"Action=AddListenerCertificates&Version=2015-12-01&ListenerArn=LN&Certificates.member.1.CertificateArn=CERT",
		"Action=RemoveListenerCertificates&Version=2015-12-01&ListenerArn=LN&Certificates.member.1.CertificateArn=CERT",
		"Action=DescribeListenerCertificates&Version=2015-12-01&ListenerArn=LN&PageSize=1",
		"Action=DescribeListeners&Version=2015-12-01&LoadBalancerArn=LB&Marker=zz",
		"Action=ModifyTargetGroupAttributes&Version=2015-12-01&TargetGroupArn=TG&Attributes.member.1.Key=deregistration_delay.timeout_seconds&Attributes.member.1.Value=5",
		"Action=ModifyTargetGroup&Version=2015-12-01&TargetGroupArn=TG&HealthCheckPath=/x",
		"Action=AddTags&Version=2015-12-01&ResourceArns.member.1=LB&Tags.member.1.Key=a",
		"Action=DeleteTargetGroup&Version=2015-12-01&TargetGroupArn=TG",
		"Action=DeleteListener&Version=2015-12-01&ListenerArn=LN",
		"Action=DeleteLoadBalancer&Version=2015-12-01&LoadBalancerArn=LB",
		"Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=tag:k&Filter.1.Value.1=v&SubnetId.1=subnet-a",
		"ACM{\"CertificateStatuses\":[\"ISSUED\"],\"MaxItems\":1}",
		"ACD{\"CertificateArn\":\"CERT\"}",
	} {
		f.Add(s)
	}
	fk, err := New(Options{Speed: 1000})
	if err != nil {
		f.Fatal(err)
	}
	defer fk.Close()
	cert, _ := fk.AddCertificate(Certificate{Domain: "a.example.com"})
	// Resources named by the placeholders (an input may delete them; later
	// inputs then get NotFound, which is fine).
	c := sdk(fk)
	ctx := context.Background()
	lbo, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("fz"), Type: types.LoadBalancerTypeEnumNetwork, Subnets: []string{"s"}})
	if err != nil {
		f.Fatal(err)
	}
	tgo, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("fz"), Protocol: types.ProtocolEnumTcp, Port: aws.Int32(80), TargetType: types.TargetTypeEnumIp})
	if err != nil {
		f.Fatal(err)
	}
	lno, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lbo.LoadBalancers[0].LoadBalancerArn, Port: aws.Int32(443), Protocol: types.ProtocolEnumTls,
		Certificates:   []types.Certificate{{CertificateArn: &cert}},
		DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: tgo.TargetGroups[0].TargetGroupArn}}})
	if err != nil {
		f.Fatal(err)
	}
	r := strings.NewReplacer("LB", url.QueryEscape(aws.ToString(lbo.LoadBalancers[0].LoadBalancerArn)),
		"TG", url.QueryEscape(aws.ToString(tgo.TargetGroups[0].TargetGroupArn)),
		"LN", url.QueryEscape(aws.ToString(lno.Listeners[0].ListenerArn)), "CERT", url.QueryEscape(cert))
	f.Fuzz(func(t *testing.T, body string) {
		var req *http.Request
		switch {
		case strings.HasPrefix(body, "ACM"), strings.HasPrefix(body, "ACD"):
			op := map[string]string{"ACM": "ListCertificates", "ACD": "DescribeCertificate"}[body[:3]]
			req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.ReplaceAll(body[3:], "CERT", cert)))
			req.Header.Set("X-Amz-Target", acmTargetPrefix+op)
		default:
			req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(r.Replace(body)))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		w := httptest.NewRecorder()
		fk.serveAPI(w, req)
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
	})
}

func TestDescribeSubnets(t *testing.T) {
	f := start(t, 1)
	for _, s := range []Subnet{
		{ID: "subnet-a", Zone: "us-east-1a", VPC: "vpc-1", Tags: map[string]string{"kubernetes.io/role/elb": "1", "cluster": "c1"}},
		{ID: "subnet-b", Zone: "us-east-1b", VPC: "vpc-1", Tags: map[string]string{"kubernetes.io/role/elb": "1", "cluster": "c1"}},
		{ID: "subnet-x", Zone: "us-east-1a", VPC: "vpc-1", Tags: map[string]string{"kubernetes.io/role/elb": "1", "cluster": "c2"}},
	} {
		if err := f.AddSubnet(s); err != nil {
			t.Fatal(err)
		}
	}
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(f.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), Retryer: connectionRetries()})
	out, err := c.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/role/elb"), Values: []string{"1"}}, {Name: aws.String("tag:cluster"), Values: []string{"c1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range out.Subnets {
		got = append(got, aws.ToString(s.SubnetId)+"/"+aws.ToString(s.AvailabilityZone)+"/"+aws.ToString(s.VpcId))
	}
	if !slices.Equal(got, []string{"subnet-a/us-east-1a/vpc-1", "subnet-b/us-east-1b/vpc-1"}) || len(out.Subnets[0].Tags) != 2 {
		t.Fatalf("subnets %v", got)
	}
	_, err = c.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("owner-id"), Values: []string{"x"}}}})
	if code(err) != "InvalidParameterValue" {
		t.Fatalf("unknown filter: %v", err)
	}
}
