// Package chart tests the Helm chart deploy/helm/sluice, the one install
// path of sluice: helm lint, `helm template` golden files for the main value
// sets, that the plain manifests in deploy/ are the chart's output, that
// every value is documented and that the Grafana dashboard only uses
// metrics the code registers. It sits outside the data flow; the e2e suite
// (test/e2e, TestHelm) installs the same chart into a local cluster.
//
// The tests run the pinned helm that scripts/helm.sh installs (built once
// from the Go module proxy into the cache; the first run takes minutes).
package chart
