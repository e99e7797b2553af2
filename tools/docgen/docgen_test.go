package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReferenceUpToDate: the committed reference pages are what the code
// gives now.
func TestReferenceUpToDate(t *testing.T) {
	r := root(t)
	pages, err := generate(r)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(r, name))
		if err != nil {
			t.Errorf("%s: %v (run `go run ./tools/docgen`)", name, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s differs from the code: run `go run ./tools/docgen` (make docs) and commit it", name)
		}
	}
}

// TestEveryEventReasonIsTroubleshot: each Event reason the code emits has
// its own heading in docs/troubleshooting.md (cause and fix).
func TestEveryEventReasonIsTroubleshot(t *testing.T) {
	r := root(t)
	src, err := parseSource(r)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(r, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	reasons := src.eventReasons()
	if len(reasons) < 40 {
		t.Fatalf("found only %d Event reasons in the code: the scan is broken", len(reasons))
	}
	for _, rs := range reasons {
		if !anchors[anchor(rs.Name)] {
			t.Errorf("Event reason %s (%s) has no entry in docs/troubleshooting.md: add a heading %q with its cause and fix", rs.Name, strings.Join(rs.Files, ", "), rs.Name)
		}
	}
}

// TestScanFindsKnownNames: the scans see names that are known to exist,
// so a scan that silently finds nothing fails.
func TestScanFindsKnownNames(t *testing.T) {
	src, err := parseSource(root(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ServiceNotFound": false, "DeletionBlocked": false, "DNSPublished": false, "SubnetsNotFound": false, "Healthy": false}
	for _, r := range src.eventReasons() {
		if _, ok := want[r.Name]; ok {
			want[r.Name] = true
		}
		if r.Name == "InSync" || r.Name == "TimersFit" {
			t.Errorf("condition reason %s listed as an Event reason", r.Name)
		}
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("Event reason %s not found", name)
		}
	}
	metrics := map[string]metric{}
	for _, m := range src.metrics() {
		metrics[m.Name] = m
	}
	for name, labels := range map[string]string{
		"sluice_requests_total":               "ingress,service,code_class",
		"sluice_controller_targets":           "binding,state",
		"sluice_build_info":                   "version,commit,goversion",
		"sluice_table_change_to_live_seconds": "",
	} {
		m, ok := metrics[name]
		if !ok {
			t.Errorf("metric %s not found", name)
			continue
		}
		if got := strings.Join(m.Labels, ","); got != labels {
			t.Errorf("metric %s: labels %q, want %q", name, got, labels)
		}
	}
}
