package awsfake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/smithy-go"
)

// r53 is the real Route53 SDK client pointed at f, retrying only
// connection errors, so that every answer is seen.
func r53(f *Fake) *route53.Client {
	return route53.New(route53.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(f.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      connectionRetries(),
	})
}

func startR53(t *testing.T, propagation time.Duration) (*Fake, *route53.Client) {
	t.Helper()
	f, err := New(Options{ChangePropagation: propagation})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, r53(f)
}

func addZone(t *testing.T, f *Fake, name string) string {
	t.Helper()
	id, err := f.AddHostedZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func rrset(name, typ string, ttl int64, values ...string) types.ResourceRecordSet {
	rs := types.ResourceRecordSet{Name: aws.String(name), Type: types.RRType(typ), TTL: aws.Int64(ttl)}
	for _, v := range values {
		rs.ResourceRecords = append(rs.ResourceRecords, types.ResourceRecord{Value: aws.String(v)})
	}
	return rs
}

func change(action string, rs types.ResourceRecordSet) types.Change {
	return types.Change{Action: types.ChangeAction(action), ResourceRecordSet: &rs}
}

func apply(c *route53.Client, zone string, changes ...types.Change) (*route53.ChangeResourceRecordSetsOutput, error) {
	return c.ChangeResourceRecordSets(context.Background(), &route53.ChangeResourceRecordSetsInput{
		HostedZoneId: aws.String(zone),
		ChangeBatch:  &types.ChangeBatch{Changes: changes},
	})
}

// invalid returns the messages of an InvalidChangeBatch answer.
func invalid(t *testing.T, err error) string {
	t.Helper()
	var icb *types.InvalidChangeBatch
	if !errors.As(err, &icb) {
		t.Fatalf("error %v, want InvalidChangeBatch", err)
	}
	return icb.ErrorMessage()
}

func TestRoute53Zones(t *testing.T) {
	f, c := startR53(t, -1)
	ctx := context.Background()
	org := addZone(t, f, "example.org")
	com := addZone(t, f, "Example.com.")
	apps := addZone(t, f, "apps.example.com")

	var ids []string
	pages := route53.NewListHostedZonesPaginator(c, &route53.ListHostedZonesInput{MaxItems: aws.Int32(2)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range out.HostedZones {
			ids = append(ids, aws.ToString(z.Id))
		}
	}
	if want := []string{"/hostedzone/" + org, "/hostedzone/" + com, "/hostedzone/" + apps}; !slices.Equal(ids, want) {
		t.Errorf("ListHostedZones = %v, want %v", ids, want)
	}

	// By name, in reversed-label order, from a name on, paged.
	out, err := c.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{DNSName: aws.String("example.com"), MaxItems: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.HostedZones) != 1 || aws.ToString(out.HostedZones[0].Name) != "example.com." || !out.IsTruncated ||
		aws.ToString(out.NextDNSName) != "apps.example.com." || aws.ToString(out.NextHostedZoneId) != apps {
		t.Errorf("ListHostedZonesByName(example.com) = %+v", out)
	}
	out, err = c.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{DNSName: out.NextDNSName, HostedZoneId: out.NextHostedZoneId})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.HostedZones) != 2 || aws.ToString(out.HostedZones[1].Name) != "example.org." || out.IsTruncated {
		t.Errorf("second page = %+v", out.HostedZones)
	}

	z, err := c.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String("/hostedzone/" + com)})
	if err != nil || aws.ToString(z.HostedZone.Name) != "example.com." || len(z.DelegationSet.NameServers) != 4 {
		t.Errorf("GetHostedZone = %+v, %v", z, err)
	}
	_, err = c.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String("ZNOSUCHZONE")})
	var nsz *types.NoSuchHostedZone
	if !errors.As(err, &nsz) {
		t.Errorf("unknown zone: %v, want NoSuchHostedZone", err)
	}
}

func TestRoute53Changes(t *testing.T) {
	f, c := startR53(t, -1)
	ctx := context.Background()
	zone := addZone(t, f, "example.com")
	tg, err := f.AddTargetGroup(TargetGroup{Name: "tg"})
	if err != nil {
		t.Fatal(err)
	}
	nlb, err := f.AddLoadBalancer(LoadBalancer{Name: "web", TargetGroups: []string{tg}})
	if err != nil {
		t.Fatal(err)
	}
	alias := types.ResourceRecordSet{Name: aws.String("web.example.com"), Type: types.RRTypeA,
		AliasTarget: &types.AliasTarget{DNSName: aws.String(nlb.DNSName), HostedZoneId: aws.String(nlb.CanonicalHostedZoneID)}}
	_, err = apply(c, zone,
		change("CREATE", rrset("a.example.com", "A", 60, "10.244.0.1", "10.244.0.2")),
		change("CREATE", rrset("*.Apps.example.com.", "CNAME", 60, "a.example.com")),
		change("CREATE", rrset("a.example.com", "TXT", 60, `"heritage=sluice,owner=x"`)),
		change("CREATE", alias),
	)
	if err != nil {
		t.Fatal(err)
	}
	got := f.RecordSets(zone)
	var names []string
	for _, rs := range got {
		names = append(names, rs.Type+" "+rs.Name)
	}
	want := []string{"NS example.com.", "SOA example.com.", "A a.example.com.", "TXT a.example.com.", `CNAME \052.apps.example.com.`, "A web.example.com."}
	if !slices.Equal(names, want) {
		t.Errorf("record sets %q, want %q", names, want)
	}
	if rs, ok := f.RecordSet(zone, "web.example.com", "A"); !ok || rs.Alias == nil || rs.Alias.DNSName != nlb.DNSName+"." {
		t.Errorf("alias = %+v, %v", rs, ok)
	}

	// Listing pages through the real paginator, two at a time.
	var listed []string
	pages := route53.NewListResourceRecordSetsPaginator(c, &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(zone), MaxItems: aws.Int32(2)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range out.ResourceRecordSets {
			listed = append(listed, string(rs.Type)+" "+aws.ToString(rs.Name))
		}
	}
	if !slices.Equal(listed, want) {
		t.Errorf("listed %q, want %q", listed, want)
	}

	// The compare-and-swap: DELETE(old exactly) + CREATE(new) in one batch.
	if _, err := apply(c, zone,
		change("DELETE", rrset("a.example.com", "A", 60, "10.244.0.2", "10.244.0.1")),
		change("CREATE", rrset("a.example.com", "A", 60, "10.244.0.3"))); err != nil {
		t.Fatalf("delete+create: %v", err)
	}

	for _, tc := range []struct {
		name    string
		changes []types.Change
		want    string
	}{
		{"create existing", []types.Change{change("CREATE", rrset("a.example.com", "A", 60, "10.244.0.9"))},
			"Tried to create resource record set [name='a.example.com.', type='A'] but it already exists"},
		{"delete mismatch", []types.Change{change("DELETE", rrset("a.example.com", "A", 60, "10.244.0.1"))},
			"Tried to delete resource record set [name='a.example.com.', type='A'] but the values provided do not match the current values"},
		{"delete missing", []types.Change{change("DELETE", rrset("b.example.com", "A", 60, "10.244.0.1"))},
			"Tried to delete resource record set [name='b.example.com.', type='A'] but it was not found"},
		{"cname at apex", []types.Change{change("CREATE", rrset("example.com", "CNAME", 60, "x.example.org"))},
			"RRSet of type CNAME with DNS name example.com. is not permitted at apex in zone example.com."},
		{"cname beside A", []types.Change{change("CREATE", rrset("a.example.com", "CNAME", 60, "x.example.org"))},
			"RRSet of type CNAME with DNS name a.example.com. is not permitted as it conflicts with other records with the same DNS name in zone example.com."},
		{"duplicate", []types.Change{change("UPSERT", rrset("c.example.com", "A", 60, "10.244.0.1")), change("UPSERT", rrset("c.example.com", "A", 60, "10.244.0.2"))},
			"The request contains an invalid set of changes for a resource record set 'A c.example.com.'"},
		{"outside zone", []types.Change{change("CREATE", rrset("a.example.org", "A", 60, "10.244.0.1"))},
			"RRSet with DNS name a.example.org. is not permitted in zone example.com."},
		{"bad address", []types.Change{change("CREATE", rrset("d.example.com", "A", 60, "10.244.0"))}, "ARRDATAIllegalIPv4Address"},
		{"unquoted txt", []types.Change{change("CREATE", rrset("d.example.com", "TXT", 60, "heritage"))}, "InvalidCharacterString"},
		{"alias to no load balancer", []types.Change{change("CREATE", types.ResourceRecordSet{Name: aws.String("e.example.com"), Type: types.RRTypeA,
			AliasTarget: &types.AliasTarget{DNSName: aws.String("gone-0123.elb.us-east-1.amazonaws.com"), HostedZoneId: aws.String(nlb.CanonicalHostedZoneID)}})},
			"does not lie within the target zone"},
		// Atomic: the good change of a failing batch is not applied.
		{"atomic", []types.Change{change("CREATE", rrset("f.example.com", "A", 60, "10.244.0.1")), change("CREATE", rrset("a.example.com", "A", 60, "10.244.0.1"))},
			"but it already exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apply(c, zone, tc.changes...)
			if msg := invalid(t, err); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want %q", msg, tc.want)
			}
		})
	}
	if _, ok := f.RecordSet(zone, "f.example.com", "A"); ok {
		t.Error("a failed batch was applied in part")
	}

	// The limits of one request.
	var many []types.Change
	for i := range 1001 {
		many = append(many, change("CREATE", rrset(fmt.Sprintf("h%d.example.com", i), "A", 60, "10.244.0.1")))
	}
	if msg := invalid(t, func() error { _, err := apply(c, zone, many...); return err }()); !strings.Contains(msg, "Number of records limit of 1000 exceeded") {
		t.Errorf("1001 records: %q", msg)
	}
	if _, err := apply(c, zone, many[:1000]...); err != nil {
		t.Errorf("1000 records: %v", err)
	}
	long := `"` + strings.Repeat("x", 250) + `"`
	var big []types.Change
	for i := range 128 { // 128 × 252 characters > 32,000
		big = append(big, change("CREATE", rrset(fmt.Sprintf("t%d.example.com", i), "TXT", 60, long)))
	}
	if msg := invalid(t, func() error { _, err := apply(c, zone, big...); return err }()); !strings.Contains(msg, "exceeds the limit of 32000") {
		t.Errorf("32,000+ characters: %q", msg)
	}

	// Malformed input is an error, not a crash.
	_, err = apply(c, zone, change("CREATE", types.ResourceRecordSet{Name: aws.String("g.example.com"), Type: types.RRTypeA}))
	var ii *types.InvalidInput
	if !errors.As(err, &ii) {
		t.Errorf("no TTL and values: %v, want InvalidInput", err)
	}
}

func TestRoute53ChangePropagation(t *testing.T) {
	f, c := startR53(t, 300*time.Millisecond)
	zone := addZone(t, f, "example.com")
	out, err := apply(c, zone, change("UPSERT", rrset("a.example.com", "A", 60, "10.244.0.1")))
	if err != nil {
		t.Fatal(err)
	}
	if out.ChangeInfo.Status != types.ChangeStatusPending {
		t.Errorf("new change %s, want PENDING", out.ChangeInfo.Status)
	}
	for {
		got, err := c.GetChange(context.Background(), &route53.GetChangeInput{Id: out.ChangeInfo.Id})
		if err != nil {
			t.Fatal(err)
		}
		if got.ChangeInfo.Status == types.ChangeStatusInsync {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = c.GetChange(context.Background(), &route53.GetChangeInput{Id: aws.String("/change/CNOSUCH")})
	var nsc *types.NoSuchChange
	if !errors.As(err, &nsc) {
		t.Errorf("unknown change: %v, want NoSuchChange", err)
	}
}

func TestRoute53Faults(t *testing.T) {
	f, c := startR53(t, -1)
	zone := addZone(t, f, "example.com")
	f.SetFaults(Faults{Throttle: 1, Actions: []string{"ListResourceRecordSets"}})
	_, err := c.ListResourceRecordSets(context.Background(), &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(zone)})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "Throttling" {
		t.Errorf("throttled list: %v", err)
	}
	f.SetFaults(Faults{PriorRequestNotComplete: 0.5})
	_, err = apply(c, zone, change("UPSERT", rrset("a.example.com", "A", 60, "10.244.0.1")))
	var prnc *types.PriorRequestNotComplete
	if !errors.As(err, &prnc) {
		t.Errorf("first change: %v, want PriorRequestNotComplete", err)
	}
	if _, err := apply(c, zone, change("UPSERT", rrset("a.example.com", "A", 60, "10.244.0.1"))); err != nil {
		t.Errorf("second change: %v", err)
	}
	if n := f.Calls()["ChangeResourceRecordSets"]; n != 2 {
		t.Errorf("ChangeResourceRecordSets calls = %d, want 2", n)
	}
}

// FuzzRoute53 feeds the Route53 side of the fake arbitrary requests: it
// answers, never panics, and a 200 is well-formed.
func FuzzRoute53(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/2013-04-01/hostedzone?maxitems=1", ""},
		{"GET", "/2013-04-01/hostedzonesbyname?dnsname=example.com&hostedzoneid=Z1", ""},
		{"GET", "/2013-04-01/hostedzone/ZONE/rrset?name=%5C052.example.com&type=A&maxitems=2", ""},
		{"POST", "/2013-04-01/hostedzone/ZONE/rrset/", `<ChangeResourceRecordSetsRequest xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><ChangeBatch><Changes><Change><Action>CREATE</Action><ResourceRecordSet><Name>*.example.com</Name><Type>TXT</Type><TTL>60</TTL><ResourceRecords><ResourceRecord><Value>"a" "b"</Value></ResourceRecord></ResourceRecords></ResourceRecordSet></Change></Changes></ChangeBatch></ChangeResourceRecordSetsRequest>`},
		{"POST", "/2013-04-01/hostedzone/ZONE/rrset/", `<ChangeResourceRecordSetsRequest><ChangeBatch><Changes><Change><Action>DELETE</Action><ResourceRecordSet><Name>example.com</Name><Type>NS</Type><AliasTarget><HostedZoneId>ZONE</HostedZoneId><DNSName>\\.</DNSName></AliasTarget></ResourceRecordSet></Change></Changes></ChangeBatch></ChangeResourceRecordSetsRequest>`},
		{"GET", "/2013-04-01/change/C1", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fake, err := New(Options{ChangePropagation: -1})
	if err != nil {
		f.Fatal(err)
	}
	defer fake.Close()
	zone, err := fake.AddHostedZone("example.com")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if method != "GET" && method != "POST" || !strings.HasPrefix(target, "/") {
			return
		}
		target = strings.ReplaceAll(target, "ZONE", zone)
		req, err := http.NewRequest(method, "http://fake"+target, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/2013-04-01/") {
			return
		}
		w := httptest.NewRecorder()
		fake.serveAPI(w, req)
		if w.Code != http.StatusOK && (w.Code < 400 || w.Code > 599) {
			t.Errorf("status %d", w.Code)
		}
		if w.Code == http.StatusOK && !strings.Contains(w.Body.String(), "Response xmlns=") {
			t.Errorf("200 without a response document: %q", w.Body.String())
		}
	})
}
