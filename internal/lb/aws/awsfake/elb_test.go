package awsfake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

func TestDescribeLoadBalancersPaging(t *testing.T) {
	f := start(t, 1)
	tg, err := f.AddTargetGroup(TargetGroup{Name: "tg"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 5 {
		info, err := f.AddLoadBalancer(LoadBalancer{Name: fmt.Sprintf("lb-%d", i), TargetGroups: []string{tg}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, info.ARN)
	}
	ctx := context.Background()
	c := sdk(f)
	var got []string
	pages := elbv2.NewDescribeLoadBalancersPaginator(c, &elbv2.DescribeLoadBalancersInput{PageSize: aws.Int32(2)})
	n := 0
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, l := range out.LoadBalancers {
			got = append(got, aws.ToString(l.LoadBalancerArn))
			if l.Type != types.LoadBalancerTypeEnumNetwork || l.State == nil || l.State.Code != types.LoadBalancerStateEnumActive {
				t.Errorf("load balancer %+v: want an active network load balancer", l)
			}
		}
	}
	if !slices.Equal(got, want) || n != 3 {
		t.Errorf("paged %d pages of %v, want 3 of %v", n, got, want)
	}

	tgs, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{tg}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tgs.TargetGroups[0].LoadBalancerArns; !slices.Equal(got, want) {
		t.Errorf("LoadBalancerArns = %v, want %v", got, want)
	}

	_, err = c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: []string{want[0], want[0] + "x"}})
	var nf *types.LoadBalancerNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("unknown ARN: %v, want LoadBalancerNotFound", err)
	}
	_, err = c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Marker: aws.String("zz")})
	if err == nil {
		t.Error("bad marker accepted")
	}
	if _, err := f.AddLoadBalancer(LoadBalancer{Name: "lb-0"}); err == nil {
		t.Error("duplicate name accepted")
	}
	if _, err := f.AddLoadBalancer(LoadBalancer{Name: "x", TargetGroups: []string{"nope"}}); err == nil {
		t.Error("unknown target group accepted")
	}
}
