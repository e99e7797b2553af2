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
//
// Once ready it prints one line per group ("ARN NAME LISTENER") and, with
// --out, writes the same as JSON. It stops on SIGINT or SIGTERM.
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

type config struct {
	TargetGroups []groupConfig     `json:"targetGroups"`
	Instances    map[string]string `json:"instances"`
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
	f, err := awsfake.New(awsfake.Options{Speed: *speed, Region: *region, Address: *listen, Logger: log})
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
	if *out != "" {
		b, _ := json.MarshalIndent(map[string]any{"endpoint": f.URL(), "targetGroups": groups}, "", "  ")
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
