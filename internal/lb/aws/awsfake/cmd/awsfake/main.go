// Command awsfake runs the awsfake ELBv2 endpoint standalone, for end-to-end
// tests that run the sluice controller as a process:
//
//	awsfake --listen 127.0.0.1:4566 --speed 10 --config groups.yaml --out state.json
//	sluice controller --aws-endpoint http://127.0.0.1:4566 ...   # AWS_REGION, static AWS_ACCESS_KEY_ID/SECRET
//
// The config file (YAML or JSON) lists target groups and EC2 instances:
//
//	targetGroups:
//	- name: sluice-web
//	  targetType: ip              # or instance
//	  protocol: TCP               # NLB behaviour; HTTP: ALB behaviour
//	  port: 8080
//	  healthCheckPath: /healthz
//	  healthCheckIntervalSeconds: 10
//	  healthyThresholdCount: 3
//	  unhealthyThresholdCount: 3
//	  deregistrationDelaySeconds: 30
//	  newConnectionWindowSeconds: 10
//	  listen: true                # open a traffic listener on 127.0.0.1
//	  tags: {sluice.dev/cluster: local, sluice.dev/frontend: web}
//	instances:
//	  i-0123456789abcdef0: 10.244.1.10
//	loadBalancers:                # in front of the groups above, by name
//	- name: web
//	  type: network               # or application
//	  scheme: internet-facing     # or internal
//	  targetGroups: [sluice-web]
//	hostedZones: [example.com]    # Route53, on the same endpoint
//
// Once ready it prints one line per group ("ARN NAME LISTENER"), load
// balancer ("ARN NAME DNSNAME ZONEID") and hosted zone ("ID NAME") and,
// with --out, writes the same as JSON. It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

type groupConfig struct {
	Name                       string            `json:"name"`
	TargetType                 string            `json:"targetType"`
	Protocol                   string            `json:"protocol"`
	Port                       int               `json:"port"`
	HealthCheckPath            string            `json:"healthCheckPath"`
	HealthCheckPort            string            `json:"healthCheckPort"`
	HealthCheckIntervalSeconds int               `json:"healthCheckIntervalSeconds"`
	HealthCheckTimeoutSeconds  int               `json:"healthCheckTimeoutSeconds"`
	HealthyThresholdCount      int               `json:"healthyThresholdCount"`
	UnhealthyThresholdCount    int               `json:"unhealthyThresholdCount"`
	DeregistrationDelaySeconds *int              `json:"deregistrationDelaySeconds"`
	NewConnectionWindowSeconds *int              `json:"newConnectionWindowSeconds"`
	Listen                     bool              `json:"listen"`
	Tags                       map[string]string `json:"tags"`
}

type lbConfig struct {
	Name         string   `json:"name"`
	Type         string   `json:"type"`
	Scheme       string   `json:"scheme"`
	TargetGroups []string `json:"targetGroups"`
}

// certConfig seeds an ACM certificate (managed load balancers find them).
type certConfig struct {
	Domain string   `json:"domain"`
	SANs   []string `json:"sans"`
	Status string   `json:"status"`
	// NotAfter is RFC 3339; empty: in 395 days.
	NotAfter string `json:"notAfter"`
}

type config struct {
	TargetGroups  []groupConfig     `json:"targetGroups"`
	Instances     map[string]string `json:"instances"`
	LoadBalancers []lbConfig        `json:"loadBalancers"`
	HostedZones   []string          `json:"hostedZones"`
	Certificates  []certConfig      `json:"certificates"`
}

// LoadBalancer is one line of the output.
type LoadBalancer struct {
	ARN                   string `json:"arn"`
	Name                  string `json:"name"`
	DNSName               string `json:"dnsName"`
	CanonicalHostedZoneID string `json:"canonicalHostedZoneId"`
}

// Zone is one line of the output.
type Zone struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Group is one line of the output.
type Group struct {
	ARN      string `json:"arn"`
	Name     string `json:"name"`
	Listener string `json:"listener,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "awsfake:", err)
		os.Exit(1)
	}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// delay maps an optional seconds field: absent → AWS's default (0), 0 →
// none (negative for the fake).
func delay(p *int) time.Duration {
	switch {
	case p == nil:
		return 0
	case *p <= 0:
		return -1
	default:
		return seconds(*p)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:4566", "API address (host:port)")
	speed := flag.Float64("speed", 1, "divide every modelled duration by this factor")
	region := flag.String("region", "us-east-1", "region in the ARNs")
	cfgPath := flag.String("config", "", "target groups and instances (YAML or JSON)")
	out := flag.String("out", "", "write the created groups as JSON to this file")
	verbose := flag.Bool("v", false, "log every request")
	propagation := flag.Duration("change-propagation", 0, "how long a Route53 change is PENDING, before --speed (0: 30s; negative: none)")
	flag.Parse()

	var cfg config
	if *cfgPath != "" {
		b, err := os.ReadFile(*cfgPath)
		if err != nil {
			return fmt.Errorf("reading config: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
			return fmt.Errorf("parsing config %s: %w", *cfgPath, err)
		}
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	f, err := awsfake.New(awsfake.Options{Speed: *speed, Region: *region, Address: *listen, Logger: log, ChangePropagation: *propagation})
	if err != nil {
		return err
	}
	defer f.Close()
	for id, ip := range cfg.Instances {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return fmt.Errorf("instance %s: %w", id, err)
		}
		if err := f.AddInstance(id, a); err != nil {
			return err
		}
	}
	var groups []Group
	for _, g := range cfg.TargetGroups {
		arn, err := f.AddTargetGroup(awsfake.TargetGroup{
			Name: g.Name, TargetType: g.TargetType, Protocol: g.Protocol, Port: g.Port,
			HealthCheckPath: g.HealthCheckPath, HealthCheckPort: g.HealthCheckPort,
			HealthCheckInterval: seconds(g.HealthCheckIntervalSeconds), HealthCheckTimeout: seconds(g.HealthCheckTimeoutSeconds),
			HealthyThreshold: g.HealthyThresholdCount, UnhealthyThreshold: g.UnhealthyThresholdCount,
			DeregistrationDelay: delay(g.DeregistrationDelaySeconds), NewConnectionWindow: delay(g.NewConnectionWindowSeconds),
			Listen: g.Listen, Tags: g.Tags,
		})
		if err != nil {
			return err
		}
		l, _ := f.Listener(arn)
		groups = append(groups, Group{ARN: arn, Name: g.Name, Listener: l})
		fmt.Println(arn, g.Name, l)
	}
	lbs, zones, err := addFrontends(f, cfg, groups)
	if err != nil {
		return err
	}
	if *out != "" {
		b, _ := json.MarshalIndent(map[string]any{"endpoint": f.URL(), "targetGroups": groups, "loadBalancers": lbs, "hostedZones": zones}, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", *out, err)
		}
	}
	log.Info("awsfake ready", "endpoint", f.URL(), "speed", *speed, "targetGroups", len(groups))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

// addFrontends creates the configured load balancers (their target groups
// named) and hosted zones, and prints them.
func addFrontends(f *awsfake.Fake, cfg config, groups []Group) ([]LoadBalancer, []Zone, error) {
	arnOf := map[string]string{}
	for _, g := range groups {
		arnOf[g.Name] = g.ARN
	}
	var lbs []LoadBalancer
	for _, l := range cfg.LoadBalancers {
		var arns []string
		for _, name := range l.TargetGroups {
			arn, ok := arnOf[name]
			if !ok {
				return nil, nil, fmt.Errorf("load balancer %s: no target group %q in the config", l.Name, name)
			}
			arns = append(arns, arn)
		}
		info, err := f.AddLoadBalancer(awsfake.LoadBalancer{Name: l.Name, Type: l.Type, Scheme: l.Scheme, TargetGroups: arns})
		if err != nil {
			return nil, nil, err
		}
		lbs = append(lbs, LoadBalancer{ARN: info.ARN, Name: l.Name, DNSName: info.DNSName, CanonicalHostedZoneID: info.CanonicalHostedZoneID})
		fmt.Println(info.ARN, l.Name, info.DNSName, info.CanonicalHostedZoneID)
	}
	for _, c := range cfg.Certificates {
		var notAfter time.Time
		if c.NotAfter != "" {
			t, err := time.Parse(time.RFC3339, c.NotAfter)
			if err != nil {
				return nil, nil, fmt.Errorf("certificate %s: notAfter: %w", c.Domain, err)
			}
			notAfter = t
		}
		arn, err := f.AddCertificate(awsfake.Certificate{Domain: c.Domain, SANs: c.SANs, Status: c.Status, NotAfter: notAfter})
		if err != nil {
			return nil, nil, err
		}
		fmt.Println(arn, c.Domain)
	}
	var zones []Zone
	for _, name := range cfg.HostedZones {
		id, err := f.AddHostedZone(name)
		if err != nil {
			return nil, nil, err
		}
		zones = append(zones, Zone{ID: id, Name: name})
		fmt.Println(id, name)
	}
	return lbs, zones, nil
}
