package awsfake

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// This file is the fake's EC2 DescribeSubnets (the EC2 Query protocol,
// Version=2016-11-15), which managed load balancers use to find their
// subnets by tag. AddSubnet seeds subnets.

const (
	ec2Version = "2016-11-15"
	ec2xmlns   = "http://ec2.amazonaws.com/doc/2016-11-15/"
)

// Subnet is a subnet to seed.
type Subnet struct {
	// ID ("subnet-..."), Zone (an availability zone) and VPC ("vpc-...").
	ID, Zone, VPC string
	// Tags on the subnet.
	Tags map[string]string
}

// AddSubnet makes a subnet known to DescribeSubnets.
func (f *Fake) AddSubnet(s Subnet) error {
	if !strings.HasPrefix(s.ID, "subnet-") || !strings.HasPrefix(s.VPC, "vpc-") || s.Zone == "" {
		return fmt.Errorf("adding subnet %q: want subnet-..., vpc-... and a zone", s.ID)
	}
	s.Tags = cloneMap(s.Tags)
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.ContainsFunc(f.elb.subnets, func(x Subnet) bool { return x.ID == s.ID }) {
		return fmt.Errorf("adding subnet %s: exists", s.ID)
	}
	f.elb.subnets = append(f.elb.subnets, s)
	return nil
}

// serveEC2 answers one EC2 Query request (DescribeSubnets only).
func (f *Fake) serveEC2(w http.ResponseWriter, r *http.Request, reqID string) {
	fail := func(e *apiError) {
		var out xw
		out.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
		out.open("Response")
		out.open("Errors")
		out.open("Error")
		out.elem("Code", e.code)
		out.elem("Message", e.message)
		out.close("Error")
		out.close("Errors")
		out.elem("RequestID", reqID)
		out.close("Response")
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(e.status)
		_, _ = w.Write([]byte(out.String()))
	}
	action := r.Form.Get("Action")
	if action != "DescribeSubnets" {
		fail(senderErr("InvalidAction", "The action %s is not valid for this web service", action))
		return
	}
	if e := f.fault(action); e != nil {
		fail(e)
		return
	}
	type filter struct {
		name   string
		values []string
	}
	var filters []filter
	for i := 1; i <= maxMembers; i++ {
		p := "Filter." + strconv.Itoa(i) + "."
		name := r.Form.Get(p + "Name")
		if name == "" {
			break
		}
		fl := filter{name: name}
		for j := 1; j <= maxMembers; j++ {
			v, ok := r.Form[p+"Value."+strconv.Itoa(j)]
			if !ok || len(v) == 0 {
				break
			}
			fl.values = append(fl.values, v[0])
		}
		switch {
		case strings.HasPrefix(name, "tag:"), name == "tag-key", name == "vpc-id", name == "subnet-id", name == "availability-zone":
		default:
			fail(senderErr("InvalidParameterValue", "The filter '%s' is invalid", name))
			return
		}
		filters = append(filters, fl)
	}
	var ids []string
	for i := 1; i <= maxMembers; i++ {
		v := r.Form.Get("SubnetId." + strconv.Itoa(i))
		if v == "" {
			break
		}
		ids = append(ids, v)
	}
	match := func(s Subnet, fl filter) bool {
		switch {
		case strings.HasPrefix(fl.name, "tag:"):
			v, ok := s.Tags[strings.TrimPrefix(fl.name, "tag:")]
			return ok && slices.Contains(fl.values, v)
		case fl.name == "tag-key":
			return slices.ContainsFunc(fl.values, func(k string) bool { _, ok := s.Tags[k]; return ok })
		case fl.name == "vpc-id":
			return slices.Contains(fl.values, s.VPC)
		case fl.name == "subnet-id":
			return slices.Contains(fl.values, s.ID)
		default:
			return slices.Contains(fl.values, s.Zone)
		}
	}
	f.mu.Lock()
	var sel []Subnet
	for _, s := range f.elb.subnets {
		if len(ids) > 0 && !slices.Contains(ids, s.ID) {
			continue
		}
		if !slices.ContainsFunc(filters, func(fl filter) bool { return !match(s, fl) }) {
			sel = append(sel, s)
		}
	}
	f.mu.Unlock()
	var out xw
	out.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	out.WriteString(`<DescribeSubnetsResponse xmlns="` + ec2xmlns + `">`)
	out.elem("requestId", reqID)
	out.open("subnetSet")
	for _, s := range sel {
		out.open("item")
		out.elem("subnetId", s.ID)
		out.elem("state", "available")
		out.elem("vpcId", s.VPC)
		out.elem("availabilityZone", s.Zone)
		out.open("tagSet")
		keys := make([]string, 0, len(s.Tags))
		for k := range s.Tags {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out.open("item")
			out.elem("key", k)
			out.elem("value", s.Tags[k])
			out.close("item")
		}
		out.close("tagSet")
		out.close("item")
	}
	out.close("subnetSet")
	out.close("DescribeSubnetsResponse")
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(out.String()))
}
