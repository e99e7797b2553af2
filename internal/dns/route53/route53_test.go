package route53

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"

	"sluice.dev/sluice/internal/dns"
)

func a(name string, ttl int64, values ...string) *dns.Record {
	return &dns.Record{Name: name, Type: dns.TypeA, TTL: ttl, Values: values}
}

func txt(name string, values ...string) *dns.Record {
	return &dns.Record{Name: name, Type: dns.TypeTXT, TTL: 60, Values: values}
}

func TestPrepare(t *testing.T) {
	alias := &dns.Record{Name: "www.example.com", Type: dns.TypeA, Alias: &dns.Alias{DNSName: "web-1.elb.us-east-1.amazonaws.com", HostedZoneID: "Z26RNL4JYFTOTI"}}
	for _, tc := range []struct {
		name    string
		batch   dns.Batch
		want    []string // "ACTION name type ttl values|alias"
		records int
		err     bool
	}{
		{name: "create", batch: dns.Batch{Changes: []dns.Change{{New: a("www.example.com", 60, "10.244.0.1", "10.244.0.2")}, {New: txt("www.example.com", `owner "x"`)}}},
			want: []string{`CREATE www.example.com. A 60 10.244.0.1,10.244.0.2`, `CREATE www.example.com. TXT 60 "owner \"x\""`}, records: 3},
		{name: "replace is delete old then create new", batch: dns.Batch{Changes: []dns.Change{
			{Old: a("www.example.com", 60, "10.244.0.1"), New: alias},
			{Old: txt("www.example.com", "a"), New: txt("www.example.com", "b")}}},
			want: []string{`DELETE www.example.com. A 60 10.244.0.1`, `DELETE www.example.com. TXT 60 "a"`,
				`CREATE www.example.com. A alias Z26RNL4JYFTOTI web-1.elb.us-east-1.amazonaws.com.`, `CREATE www.example.com. TXT 60 "b"`}, records: 4},
		{name: "delete", batch: dns.Batch{Changes: []dns.Change{{Old: &dns.Record{Name: "*.apps.example.com", Type: dns.TypeCNAME, TTL: 30, Values: []string{"lb.example.org"}}}}},
			want: []string{`DELETE *.apps.example.com. CNAME 30 lb.example.org.`}, records: 1},
		{name: "empty", batch: dns.Batch{Changes: []dns.Change{{}}}},
		{name: "bad type", batch: dns.Batch{Changes: []dns.Change{{New: &dns.Record{Name: "x.example.com", Type: "MX", TTL: 1, Values: []string{"1 x"}}}}}, err: true},
		{name: "trailing dot", batch: dns.Batch{Changes: []dns.Change{{New: a("x.example.com.", 60, "10.244.0.1")}}}, err: true},
		{name: "no values", batch: dns.Batch{Changes: []dns.Change{{New: a("x.example.com", 60)}}}, err: true},
		{name: "two CNAME values", batch: dns.Batch{Changes: []dns.Change{{New: &dns.Record{Name: "x.example.com", Type: dns.TypeCNAME, TTL: 60, Values: []string{"a", "b"}}}}}, err: true},
		{name: "TXT alias", batch: dns.Batch{Changes: []dns.Change{{New: &dns.Record{Name: "x.example.com", Type: dns.TypeTXT, Alias: alias.Alias}}}}, err: true},
		{name: "too big", batch: dns.Batch{Changes: []dns.Change{{New: txt("x.example.com", strings.Repeat("x", 32001))}}}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := prepare(tc.batch)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				return
			}
			var got []string
			for _, c := range p.changes {
				rs := c.ResourceRecordSet
				s := fmt.Sprintf("%s %s %s", c.Action, aws.ToString(rs.Name), rs.Type)
				if rs.AliasTarget != nil {
					s += " alias " + aws.ToString(rs.AliasTarget.HostedZoneId) + " " + aws.ToString(rs.AliasTarget.DNSName)
				} else {
					var vs []string
					for _, v := range rs.ResourceRecords {
						vs = append(vs, aws.ToString(v.Value))
					}
					s += fmt.Sprintf(" %d %s", aws.ToInt64(rs.TTL), strings.Join(vs, ","))
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) || p.records != tc.records {
				t.Errorf("changes %q (%d records)\nwant    %q (%d records)", got, p.records, tc.want, tc.records)
			}
		})
	}
}

func TestGroup(t *testing.T) {
	ps := []prepared{
		{records: 400, chars: 100, keys: []string{"a A"}},
		{records: 400, chars: 100, keys: []string{"b A"}},
		{records: 300, chars: 100, keys: []string{"c A"}}, // 1100 records: a new request
		{records: 1, chars: 31000, keys: []string{"d TXT"}},
		{records: 1, chars: 900, keys: []string{"e TXT"}}, // 32,000 characters: fits
		{records: 1, chars: 1, keys: []string{"f A"}},     // 32,001: a new request
		{records: 1, chars: 1, keys: []string{"f A"}},     // the same set again: a new request
		{records: 1000, chars: 1, keys: []string{"g A"}},
	}
	got := group(ps, []int{0, 1, 2, 3, 4, 5, 6, 7}, maxRecords, maxChars)
	want := [][]int{{0, 1}, {2, 3, 4}, {5}, {6}, {7}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("group = %v, want %v", got, want)
	}
	// 100 + 31,000 + 1,000 characters do not fit.
	ps[3].chars, ps[4].chars = 31000, 1000
	want = [][]int{{0, 1}, {2, 3}, {4, 5}, {6}, {7}}
	if got := group(ps, []int{0, 1, 2, 3, 4, 5, 6, 7}, maxRecords, maxChars); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("group = %v, want %v", got, want)
	}
	if got := group(ps, []int{1, 7}, maxRecords, maxChars); fmt.Sprint(got) != "[[1] [7]]" {
		t.Errorf("group of a subset = %v", got)
	}
	if got := group(ps, nil, maxRecords, maxChars); got != nil {
		t.Errorf("group of nothing = %v", got)
	}
}

func TestFromSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   types.ResourceRecordSet
		want *dns.Record
	}{
		{"wildcard, sorted", types.ResourceRecordSet{Name: aws.String(`\052.Apps.Example.com.`), Type: "A", TTL: aws.Int64(60),
			ResourceRecords: []types.ResourceRecord{{Value: aws.String("10.244.0.2")}, {Value: aws.String("10.244.0.1")}}},
			a("*.apps.example.com", 60, "10.244.0.1", "10.244.0.2")},
		{"txt", types.ResourceRecordSet{Name: aws.String("x.example.com."), Type: "TXT", TTL: aws.Int64(60),
			ResourceRecords: []types.ResourceRecord{{Value: aws.String(`"heritage=sluice" "\"quoted\"\011"`)}}},
			txt("x.example.com", "heritage=sluice\"quoted\"\t")},
		{"cname", types.ResourceRecordSet{Name: aws.String("x.example.com."), Type: "CNAME", TTL: aws.Int64(300),
			ResourceRecords: []types.ResourceRecord{{Value: aws.String("LB.example.org.")}}},
			&dns.Record{Name: "x.example.com", Type: "CNAME", TTL: 300, Values: []string{"lb.example.org"}}},
		{"alias", types.ResourceRecordSet{Name: aws.String("x.example.com."), Type: "AAAA",
			AliasTarget: &types.AliasTarget{DNSName: aws.String("Web-1.elb.us-east-1.amazonaws.com."), HostedZoneId: aws.String("Z26RNL4JYFTOTI")}},
			&dns.Record{Name: "x.example.com", Type: "AAAA", Alias: &dns.Alias{DNSName: "web-1.elb.us-east-1.amazonaws.com", HostedZoneID: "Z26RNL4JYFTOTI"}}},
		{"weighted: someone else's routing", types.ResourceRecordSet{Name: aws.String("x.example.com."), Type: "A", SetIdentifier: aws.String("blue"), TTL: aws.Int64(1),
			ResourceRecords: []types.ResourceRecord{{Value: aws.String("10.244.0.1")}}},
			&dns.Record{Name: "x.example.com", Type: "A/policy", TTL: 1, Values: []string{"blue"}}},
		{"SOA: read, never written", types.ResourceRecordSet{Name: aws.String("example.com."), Type: "SOA", TTL: aws.Int64(1),
			ResourceRecords: []types.ResourceRecord{{Value: aws.String("ns. host. 1 2 3 4 5")}}},
			&dns.Record{Name: "example.com", Type: "SOA", TTL: 1, Values: []string{"ns. host. 1 2 3 4 5"}}},
		{"MX", types.ResourceRecordSet{Name: aws.String("mail.example.com."), Type: "MX", TTL: aws.Int64(60),
			ResourceRecords: []types.ResourceRecord{{Value: aws.String("20 b.example.net.")}, {Value: aws.String("10 a.example.net.")}}},
			&dns.Record{Name: "mail.example.com", Type: "MX", TTL: 60, Values: []string{"10 a.example.net.", "20 b.example.net."}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromSet(tc.in)
			if !reflect.DeepEqual(got, *tc.want) {
				t.Errorf("fromSet = %+v %+v\nwant %+v %+v", got, got.Alias, *tc.want, tc.want.Alias)
			}
		})
	}
}

func TestZoneRef(t *testing.T) {
	for in, want := range map[string]string{
		"Z0123456789ABC":             "id Z0123456789ABC",
		"/hostedzone/Z0123456789ABC": "id Z0123456789ABC",
		"Example.com.":               "name example.com",
		"example.com":                "name example.com",
		"":                           "error",
		"a b.com":                    "error",
		"a..com":                     "error",
		"/hostedzone/":               "error",
	} {
		id, name, err := zoneRef(in)
		got := "id " + id
		switch {
		case err != nil:
			got = "error"
		case name != "":
			got = "name " + name
		}
		if got != want {
			t.Errorf("zoneRef(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzRecordText checks the parsers of Route53's answers (names and TXT
// values): they never panic, and what sluice writes reads back the same.
func FuzzRecordText(f *testing.F) {
	for _, s := range []string{"", `"a" "b"`, `\052.example.com.`, `"\"\\\011"`, `\`, `"unterminated`, strings.Repeat("x", 300), "\xff\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = normalizeName(s)
		_ = unquoteTXT(s)
		q := quoteTXT(s)
		if got := unquoteTXT(q); got != s {
			t.Errorf("unquoteTXT(quoteTXT(%q)) = %q (quoted %q)", s, got, q)
		}
		for _, part := range strings.Split(q, `" "`) {
			if len(part) > 2+4*255 {
				t.Errorf("character string longer than 255: %q", part)
			}
		}
	})
}
