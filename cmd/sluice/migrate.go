package main

import (
	"context"
	"fmt"
	"io"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/migrate"
	"sluice.dev/sluice/internal/translate"
)

// runMigrate runs `sluice migrate`: it reads every Ingress of a cluster
// (--kubeconfig, the caller's credentials) or of a directory of manifests
// (--dir) and reports, per Ingress of an ingress-nginx class and per
// nginx.ingress.kubernetes.io annotation, whether sluice serves it
// (internal/migrate). Exit status: 0 when everything in use is served, 1
// when an annotation is unsupported, refused or invalid or a document
// could not be read, 2 for a usage or read error.
func runMigrate(args []string, stdout, stderr io.Writer) int {
	var c migrateConfig
	fs := c.flags(stderr)
	kubeconfig, dir, class, output, timeout := &c.kubeconfig, &c.dir, &c.class, &c.output, &c.timeout
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice migrate [--dir DIR | --kubeconfig FILE] [--output text|json]")
		fmt.Fprintln(stderr, "Reports how sluice --ingress-nginx-compat serves each ingress-nginx annotation in use; exit 1 when any is unsupported, refused or invalid.")
		fs.usage()
	}
	pos, err := fs.parseArgs(args)
	if err != nil {
		return usageError(stderr, "migrate", err)
	}
	if len(pos) != 0 || *output != "text" && *output != "json" {
		fs.Usage()
		return 2
	}
	var in migrate.Input
	if *dir != "" {
		if in, err = migrate.ReadDir(*dir); err != nil {
			fmt.Fprintf(stderr, "sluice migrate: %v\n", err)
			return 2
		}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		cl, err := explainClient(*kubeconfig)
		if err != nil {
			fmt.Fprintf(stderr, "sluice migrate: %v\n", err)
			return 2
		}
		var note string
		if in, note, err = readMigrateCluster(ctx, cl); err != nil {
			fmt.Fprintf(stderr, "sluice migrate: %v\n", err)
			return 2
		}
		if note != "" {
			fmt.Fprintf(stderr, "sluice migrate: %s\n", note)
		}
	}
	in.NginxClass = *class
	rep := migrate.Analyze(in)
	return printReport(stdout, stderr, "migrate", *output, rep, rep.Totals.Findings() > 0)
}

// migrateConfig is `sluice migrate`'s flags.
type migrateConfig struct {
	kubeconfig, dir, class, output string
	timeout                        time.Duration
}

// flags declares `sluice migrate`'s flags into c.
func (c *migrateConfig) flags(stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice migrate", stderr)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, ~/.kube/config, else the in-cluster configuration (ignored with --dir)")
	fs.StringVar(&c.dir, "dir", "", "read the Ingresses and IngressClasses from this directory of manifests (*.yaml, *.yml, *.json, recursively; YAML multi-document, JSON, Lists) or file instead of a cluster")
	fs.StringVar(&c.class, "ingress-nginx-class", translate.DefaultIngressNginxClass, "the IngressClass name served as ingress-nginx's even without an IngressClass object (the proxies' --ingress-nginx-class)")
	fs.StringVar(&c.output, "output", "text", `"text" or "json"`)
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long the cluster reads may take")
	return fs
}

// readMigrateCluster lists every Ingress and IngressClass. IngressClasses
// the caller may not list are left out (the class name flag still
// applies, and note says so); Ingresses must be readable.
func readMigrateCluster(ctx context.Context, cl client.Client) (in migrate.Input, note string, err error) {
	var ings networkingv1.IngressList
	if err := cl.List(ctx, &ings); err != nil {
		return in, "", fmt.Errorf("listing Ingresses: %w", err)
	}
	var classes networkingv1.IngressClassList
	if err := cl.List(ctx, &classes); err != nil {
		if !apierrors.IsForbidden(err) {
			return in, "", fmt.Errorf("listing IngressClasses: %w", err)
		}
		note = "IngressClasses may not be listed: only the class --ingress-nginx-class is known as ingress-nginx's"
	}
	for i := range ings.Items {
		in.Ingresses = append(in.Ingresses, &ings.Items[i])
	}
	for i := range classes.Items {
		in.Classes = append(in.Classes, &classes.Items[i])
	}
	return in, note, nil
}
