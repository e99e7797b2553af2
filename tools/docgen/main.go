// Command docgen writes the generated part of sluice's reference,
// docs/reference/{annotations,metrics,crds,events}.md, from the code: the
// annotation constants and ingress-nginx tables of internal/translate and
// api/, every prometheus.*Opts literal, the CRDs in deploy/crds, and the
// Event reasons and condition types the code emits. The flags reference
// (docs/reference/flags.md) comes from cmd/sluice's own flag sets, written
// by that package's TestFlagReference.
//
//	go run ./tools/docgen        # or: make docs
//
// Its tests fail when a committed page differs from what the code gives,
// and when an Event reason has no entry in docs/troubleshooting.md.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	pages, err := generate(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	for name, body := range pages {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "docgen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", name)
	}
}

// repoRoot is the nearest directory above the working directory holding
// go.mod.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("no go.mod above the working directory")
		}
		d = up
	}
}

// generate returns each generated page by its path under root.
func generate(root string) (map[string]string, error) {
	src, err := parseSource(root)
	if err != nil {
		return nil, err
	}
	crds, err := crdPage(root)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"docs/reference/annotations.md": annotationsPage(src),
		"docs/reference/metrics.md":     metricsPage(src),
		"docs/reference/crds.md":        crds,
		"docs/reference/events.md":      eventsPage(src),
	}, nil
}
