package awsfake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func start(t *testing.T, speed float64) *Fake {
	t.Helper()
	f, err := New(Options{Speed: speed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// sdk is the real SDK client pointed at f. It retries only connection
// errors (Go's transport and the SDK occasionally lose a keep-alive
// connection under load), so that every injected fault is seen.
func sdk(f *Fake) *elbv2.Client {
	return elbv2.New(elbv2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(f.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      connectionRetries(),
	})
}

// connectionRetries retries only connection errors.
func connectionRetries() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
}

func desc(ap netip.AddrPort) types.TargetDescription {
	return types.TargetDescription{Id: aws.String(ap.Addr().String()), Port: aws.Int32(int32(ap.Port()))}
}

func healthServer(t *testing.T, status int) netip.AddrPort {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(s.Close)
	return netip.MustParseAddrPort(s.Listener.Addr().String())
}

func TestSDKRoundTrip(t *testing.T) {
	f := start(t, 100)
	arn, err := f.AddTargetGroup(TargetGroup{Name: "web", Port: 8080, HealthCheckPath: "/healthz",
		DeregistrationDelay: 30 * time.Second, Tags: map[string]string{"sluice.dev/cluster": "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, ctx := sdk(f), context.Background()
	ap := healthServer(t, 200)
	if _, err := c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &arn,
		Targets: []types.TargetDescription{{Id: aws.String(ap.Addr().String()), Port: aws.Int32(int32(ap.Port())), AvailabilityZone: aws.String("us-east-1b")}}}); err != nil {
		t.Fatal(err)
	}
	h, err := c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &arn})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.TargetHealthDescriptions) != 1 {
		t.Fatalf("%+v", h.TargetHealthDescriptions)
	}
	d := h.TargetHealthDescriptions[0]
	if aws.ToString(d.Target.Id) != ap.Addr().String() || aws.ToInt32(d.Target.Port) != int32(ap.Port()) ||
		aws.ToString(d.Target.AvailabilityZone) != "us-east-1b" || d.TargetHealth.State != types.TargetHealthStateEnumInitial ||
		d.TargetHealth.Reason != types.TargetHealthReasonEnumRegistrationInProgress {
		t.Fatalf("described %+v %+v", d.Target, d.TargetHealth)
	}
	// A target asked for by name but not registered is unused.
	other := netip.AddrPortFrom(ap.Addr(), ap.Port()+1)
	h, err = c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &arn, Targets: []types.TargetDescription{desc(other)}})
	if err != nil || h.TargetHealthDescriptions[0].TargetHealth.State != types.TargetHealthStateEnumUnused ||
		h.TargetHealthDescriptions[0].TargetHealth.Reason != types.TargetHealthReasonEnumNotRegistered {
		t.Fatalf("unregistered: %+v, %v", h.TargetHealthDescriptions, err)
	}

	g, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{arn}})
	if err != nil {
		t.Fatal(err)
	}
	tg := g.TargetGroups[0]
	if aws.ToString(tg.TargetGroupName) != "web" || tg.TargetType != types.TargetTypeEnumIp || aws.ToInt32(tg.Port) != 8080 ||
		aws.ToString(tg.HealthCheckPath) != "/healthz" || tg.Protocol != types.ProtocolEnumTcp {
		t.Fatalf("group %+v", tg)
	}
	tags, err := c.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil || len(tags.TagDescriptions) != 1 || len(tags.TagDescriptions[0].Tags) != 1 ||
		aws.ToString(tags.TagDescriptions[0].Tags[0].Value) != "c1" {
		t.Fatalf("tags %+v, %v", tags, err)
	}
	attrs, err := c.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: &arn})
	if err != nil {
		t.Fatal(err)
	}
	var delay string
	for _, a := range attrs.Attributes {
		if aws.ToString(a.Key) == "deregistration_delay.timeout_seconds" {
			delay = aws.ToString(a.Value)
		}
	}
	if delay != "30" {
		t.Fatalf("delay %q", delay)
	}
	if _, err := c.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: &arn, Targets: []types.TargetDescription{desc(ap)}}); err != nil {
		t.Fatal(err)
	}
	if st := f.Targets(arn); len(st) != 1 || st[0].State != stateDraining {
		t.Fatalf("after deregister: %+v", st)
	}
}

func TestSDKErrors(t *testing.T) {
	f := start(t, 100)
	arn, err := f.AddTargetGroup(TargetGroup{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	c, ctx := sdk(f), context.Background()
	ap := healthServer(t, 200)

	missing := strings.Replace(arn, "/web/", "/nope/", 1)
	_, err = c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &missing})
	var nf *types.TargetGroupNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("missing group: %v", err)
	}
	_, err = c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &arn,
		Targets: []types.TargetDescription{desc(netip.MustParseAddrPort("192.0.2.10:80"))}})
	var it *types.InvalidTargetException
	if !errors.As(err, &it) {
		t.Fatalf("outside address: %v", err)
	}
	_, err = c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &arn,
		Targets: []types.TargetDescription{{Id: aws.String(ap.Addr().String()), AvailabilityZone: aws.String("mars-1a")}}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		t.Fatalf("bad zone: %v", err)
	}

	f.SetFaults(Faults{Throttle: 1, Actions: []string{"RegisterTargets"}})
	_, err = c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &arn, Targets: []types.TargetDescription{desc(ap)}})
	var re *smithyhttp.ResponseError
	if !errors.As(err, &ae) || ae.ErrorCode() != "Throttling" || !errors.As(err, &re) || re.HTTPStatusCode() != 400 ||
		retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
		t.Fatalf("throttled: %v", err)
	}
	if len(f.Targets(arn)) != 0 {
		t.Fatal("a throttled registration was applied")
	}
	f.SetFaults(Faults{ServerError: 1})
	_, err = c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "InternalFailure" || !errors.As(err, &re) || re.HTTPStatusCode() != 500 {
		t.Fatalf("server error: %v", err)
	}
	f.SetFaults(Faults{DescribeHealthDelay: time.Minute})
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.DescribeTargetHealth(tctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &arn}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow describe: %v", err)
	}
	f.SetFaults(Faults{})
	if got := f.Calls(); got["RegisterTargets"] < 3 || got["DescribeTargetHealth"] < 2 {
		t.Fatalf("calls %v", got)
	}
}

func TestRawErrorShape(t *testing.T) {
	f := start(t, 1)
	resp, err := http.PostForm(f.URL(), url.Values{"Action": {"DescribeTargetHealth"}, "Version": {"2015-12-01"},
		"TargetGroupArn": {"arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/x/1"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"<ErrorResponse", "<Error><Type>Sender</Type><Code>TargetGroupNotFound</Code><Message>", "</Error><RequestId>"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("status %d body %s: missing %q", resp.StatusCode, body, want)
		}
	}
	resp, err = http.PostForm(f.URL(), url.Values{"Action": {"CreateRule"}, "Version": {"2015-12-01"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "<Code>InvalidAction</Code>") {
		t.Fatalf("unknown action: %d %s", resp.StatusCode, body)
	}
}

func TestInstanceTargetsNeedKnownInstances(t *testing.T) {
	f := start(t, 100)
	arn, err := f.AddTargetGroup(TargetGroup{Name: "nodes", TargetType: "instance", HealthCheckInterval: 5 * time.Second, HealthyThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	c, ctx := sdk(f), context.Background()
	ap := healthServer(t, 200)
	in := &elbv2.RegisterTargetsInput{TargetGroupArn: &arn,
		Targets: []types.TargetDescription{{Id: aws.String("i-0abc"), Port: aws.Int32(int32(ap.Port()))}}}
	var it *types.InvalidTargetException
	if _, err := c.RegisterTargets(ctx, in); !errors.As(err, &it) {
		t.Fatalf("unknown instance: %v", err)
	}
	if err := f.AddInstance("i-0abc", ap.Addr()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTargets(ctx, in); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, arn, "i-0abc", stateHealthy)
}

func TestDescribeTargetGroupsPages(t *testing.T) {
	f := start(t, 1)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := f.AddTargetGroup(TargetGroup{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	c := sdk(f)
	var names []string
	pages := elbv2.NewDescribeTargetGroupsPaginator(c, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(2)})
	n := 0
	for pages.HasMorePages() {
		out, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, g := range out.TargetGroups {
			names = append(names, aws.ToString(g.TargetGroupName))
		}
	}
	if n != 2 || strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("%d pages, names %v", n, names)
	}
}

// waitState polls the fake until target id has state want; the deadline
// only bounds a hung test.
func waitState(t *testing.T, f *Fake, arn, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := ""
		for _, s := range f.Targets(arn) {
			if s.ID == id {
				got = s.State
			}
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("target %s is %q, want %q", id, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func FuzzServeAPI(f *testing.F) {
	f.Add("Action=RegisterTargets&Version=2015-12-01&TargetGroupArn=ARN&Targets.member.1.Id=127.0.0.1&Targets.member.1.Port=80")
	f.Add("Action=DescribeTargetHealth&Version=2015-12-01&TargetGroupArn=ARN&Targets.member.1.Id=i-1")
	f.Add("Action=DescribeTargetGroups&Version=2015-12-01&PageSize=1&Marker=5&Names.member.1=web")
	f.Add("Action=DescribeTags&Version=2015-12-01&ResourceArns.member.1=ARN")
	f.Add("Action=DeregisterTargets&Version=2015-12-01&TargetGroupArn=ARN&Targets.member.1.Id=10.244.1.1&Targets.member.1.AvailabilityZone=all")
	// Loopback only: fuzzed targets are health-checked for real.
	fk, err := New(Options{Speed: 1000, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		f.Fatal(err)
	}
	defer fk.Close()
	arn, err := fk.AddTargetGroup(TargetGroup{Name: "web", DeregistrationDelay: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		body = strings.ReplaceAll(body, "ARN", url.QueryEscape(arn))
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		fk.serveAPI(w, req)
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
	})
}
