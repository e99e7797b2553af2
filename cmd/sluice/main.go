// Command sluice is the Kubernetes ingress stack for clusters behind an
// external load balancer. One binary, several roles:
//
//	sluice proxy       the data plane: routes Ingress traffic to pod endpoints
//	sluice controller  the control plane: load-balancer targets, readiness gates, drain handshake
//	sluice node-health  per-node health check of instance-mode load balancers (host network)
//	sluice remove-bindings  deletes a release's bindings and waits for their finalizer (Helm pre-delete hook)
//	sluice explain     walks an Ingress's, binding's or Gateway's chain and names the cause of what is broken
//	sluice migrate     reports how sluice serves the ingress-nginx annotations in use (before switching)
//	sluice version     prints the version, commit and Go version (also: sluice --version)
//
// This file only dispatches; each role's flags and wiring live in its own file.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"sluice.dev/sluice/internal/version"
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"proxy", "run the ingress data plane (reverse proxy)", runProxy},
		{"controller", "register ingress pods in load balancers, gate readiness, drain, publish status", runController},
		{"node-health", "per-node health check for instance-mode load balancers: 200 iff the node's ingress replicas are ready and the node is neither detaching nor about to update", runNodeHealth},
		{"remove-bindings", "delete a release's LoadBalancerBindings and wait until the controller let them go (Helm pre-delete hook)", runRemoveBindings},
		{"explain", "explain how sluice serves an Ingress, a binding or a Gateway, and the cause of what is broken: explain ingress|binding|gateway NAMESPACE/NAME", runExplain},
		{"migrate", "report how sluice serves the ingress-nginx annotations of a cluster's or a directory's Ingresses; exit 1 when any in use is unsupported or refused", runMigrate},
		{"version", "print the version and exit", runVersion},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v") {
		args = append([]string{"version"}, args[1:]...)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sluice <command> -h' for a command's flags. Every flag can also be set as the")
	fmt.Fprintln(w, "environment variable SLUICE_<FLAG> (--drain-max-wait: SLUICE_DRAIN_MAX_WAIT); the command line wins.")
}

// runVersion runs `sluice version` (also `sluice --version`): the release
// version, the commit and the Go version, one per line ("sluice 0.2.0",
// "commit <sha>", "go go1.26.8"), or one JSON object with --output json.
func runVersion(args []string, stdout, stderr io.Writer) int {
	var output string
	fs := versionFlags(&output, stderr)
	if err := fs.parse(args); err != nil {
		return usageError(stderr, "version", err)
	}
	i := version.Get()
	switch output {
	case "text":
		fmt.Fprintf(stdout, "sluice %s\ncommit %s\ngo %s\n", i.Version, i.Commit, i.GoVersion)
	case "json":
		b, _ := json.Marshal(i) // three strings: cannot fail
		fmt.Fprintf(stdout, "%s\n", b)
	default:
		return usageError(stderr, "version", fmt.Errorf("--output must be text or json, not %q", output))
	}
	return 0
}

// versionFlags declares `sluice version`'s flags.
func versionFlags(output *string, stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice version", stderr)
	fs.StringVar(output, "output", "text", "output format: text (one line each: version, commit, Go version) or json")
	return fs
}
