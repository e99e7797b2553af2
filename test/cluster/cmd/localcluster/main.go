// Command localcluster runs sluice's local Kubernetes cluster (package
// test/cluster) until Ctrl-C: a real control plane plus simulated nodes
// that run pods as local processes. `make run` uses it.
//
//	sudo localcluster --image sluice=bin/sluice --image echo=bin/echo --apply deploy/local
//
// It prints the kubeconfig path, how to call kubectl, and what runs.
// Ctrl-C (SIGINT or SIGTERM) stops every process and removes the network
// namespaces.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sluice.dev/sluice/test/cluster"
)

// imageFlags collects repeated --image name=path flags.
type imageFlags map[string]string

func (f imageFlags) String() string {
	var parts []string
	for k, v := range f {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (f imageFlags) Set(s string) error {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return errors.New("want name=path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	f[name] = abs
	return nil
}

func main() {
	images := imageFlags{}
	dir := flag.String("dir", filepath.Join(".cache", "localcluster"), "state directory (kubeconfig, logs, pod folders); replaced at start")
	nodes := flag.Int("nodes", 3, "number of nodes")
	zones := flag.Int("zones", 2, "number of zones the nodes are spread over")
	apply := flag.String("apply", "", "directory of manifests to apply (kubectl apply -R -f) once the cluster runs")
	prefix := flag.String("prefix", "slc", "prefix of network namespaces and links")
	binDir := flag.String("kube-bin", "", "directory with kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (default: $SLUICE_KUBE_BIN or scripts/kube-binaries.sh)")
	flag.Var(images, "image", "map a container image to a local binary, name=path (repeatable)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *dir, *nodes, *zones, *apply, *prefix, *binDir, images); err != nil {
		log.Error("localcluster failed", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, dir string, nodes, zones int, apply, prefix, binDir string, images map[string]string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	log.Info("starting local cluster", "nodes", nodes, "zones", zones, "dir", dir)
	c, err := cluster.Start(ctx, cluster.Options{
		Dir:    dir,
		Nodes:  cluster.Nodes(nodes, zones),
		Images: images,
		Prefix: prefix,
		BinDir: binDir,
	})
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping local cluster")
		if err := c.Stop(); err != nil {
			log.Error("stopping", "error", err)
		}
		log.Info("stopped")
	}()
	log.Info("cluster ready", "after", time.Since(began).Round(100*time.Millisecond))
	kubectl := filepath.Join(c.BinDir(), "kubectl")
	if apply != "" {
		if err := applyDir(ctx, log, kubectl, c.Kubeconfig(), apply); err != nil {
			return err
		}
	}
	fmt.Printf(`
Local cluster running (state in %s).

  export KUBECONFIG=%s
  alias kubectl=%s
  kubectl get nodes,pods -A -o wide

API server: https://127.0.0.1:%s (tests), %s (pods)
Pod logs:   %s/<namespace>_<pod>_<uid>/<container>.log
Control-plane logs: %s
Images: %v

Nodes:
`, c.Dir(), c.Kubeconfig(), kubectl, apiPort(c), c.APIServerURL(),
		filepath.Join(c.Dir(), "pods"), filepath.Join(c.Dir(), "logs"), images)
	for _, n := range cluster.Nodes(nodes, zones) {
		fmt.Printf("  %-8s zone=%s ip=%s  (ip netns exec %s ...)\n", n.Name, n.Zone, c.NodeIP(n.Name), c.NodeNamespace(n.Name))
	}
	fmt.Println("\nProcesses:")
	for _, p := range c.Processes() {
		fmt.Printf("  %6d %s\n", p.PID, p.Name)
	}
	fmt.Println("\nCtrl-C stops everything.")
	<-ctx.Done()
	return nil
}

func apiPort(c *cluster.Cluster) string {
	s := c.APIServerURL()
	return s[strings.LastIndexByte(s, ':')+1:]
}

// applyDir runs kubectl apply, retrying for a while: a CustomResource fails
// until its CRD is established.
func applyDir(ctx context.Context, log *slog.Logger, kubectl, kubeconfig, dir string) error {
	var last error
	for attempt := 1; attempt <= 10; attempt++ {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "-R", "-f", dir)
		out, err := cmd.CombinedOutput()
		if err == nil {
			fmt.Print(string(out))
			return nil
		}
		last = fmt.Errorf("kubectl apply -R -f %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
		log.Warn("apply failed; retrying", "attempt", attempt, "error", last)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return last
}
