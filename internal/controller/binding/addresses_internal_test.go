package binding

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
	lbfake "sluice.dev/sluice/internal/lb/fake"
)

// finder is an lb.Provider that finds load balancers.
type finder struct {
	*lbfake.Provider
	lbs []aws.LoadBalancer
	err error
	got []string
}

func (f *finder) LoadBalancers(_ context.Context, groups []string) ([]aws.LoadBalancer, error) {
	f.got = groups
	return f.lbs, f.err
}

var _ LoadBalancerFinder = (*finder)(nil)

func TestAddresses(t *testing.T) {
	nlb := aws.LoadBalancer{ARN: "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/web/1", DNSName: "web-1.elb.us-east-1.amazonaws.com", CanonicalHostedZoneID: "Z26RNL4JYFTOTI"}
	found := v1alpha1.LoadBalancerAddress{Hostname: nlb.DNSName, CanonicalHostedZoneID: nlb.CanonicalHostedZoneID, LoadBalancerARN: nlb.ARN}
	old := []v1alpha1.LoadBalancerAddress{{Hostname: "old.elb.amazonaws.com"}}
	cases := []struct {
		name    string
		publish []v1alpha1.PublishAddress
		status  []v1alpha1.LoadBalancerAddress
		prov    lb.Provider
		want    []v1alpha1.LoadBalancerAddress
		wantErr bool
	}{
		{"publish wins", []v1alpha1.PublishAddress{{IP: "192.0.2.1"}, {}, {IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}, old,
			&finder{lbs: []aws.LoadBalancer{nlb}}, []v1alpha1.LoadBalancerAddress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}, false},
		{"found", nil, nil, &finder{lbs: []aws.LoadBalancer{nlb}}, []v1alpha1.LoadBalancerAddress{found}, false},
		{"found replaces old", nil, old, &finder{lbs: []aws.LoadBalancer{nlb}}, []v1alpha1.LoadBalancerAddress{found}, false},
		{"error keeps old", nil, old, &finder{err: errors.New("throttled")}, old, true},
		{"none found keeps old", nil, old, &finder{}, old, false},
		{"provider without finder, no publish", nil, old, lbfake.New(lbfake.Options{}), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &v1alpha1.LoadBalancerBinding{Spec: v1alpha1.LoadBalancerBindingSpec{Publish: tc.publish}, Status: v1alpha1.LoadBalancerBindingStatus{Addresses: tc.status}}
			got, err := addresses(context.Background(), b, tc.prov, []string{"tg-1"})
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("addresses = %+v, want %+v", got, tc.want)
			}
		})
	}
}
