// Package e2e holds sluice's end-to-end tests (build tag e2e): the local
// cluster of test/cluster (real control plane, process kubelet, network
// namespace nodes), HAProxy on the host (TestZeroDowntime) or the AWS wire
// fake's NLB listener (TestAWS) as the external load balancer,
// `sluice controller` as a host process, `sluice proxy` and an echo app as
// pods, and fixed-rate load through HAProxy while the cluster changes
// underneath (rollouts, node drain, controller crash, scaling). The goal is
// failed=0. TestTenancy (tenancy_*_test.go) is the exception: one tenant
// attacks another through two proxy fleets installed with the chart, and
// each case also counts what leaked (failed=0, leaked=0).
//
//	load (test/load) ─► HAProxy 127.0.0.1 ─► sluice proxy pods 10.244.x.y ─► echo pods
//	                        ▲ runtime API
//	                  sluice controller ◄── kube-apiserver
//
// Run as root: go test -tags e2e -v -count=1 ./test/e2e/
// SLUICE_BIN=path uses a prebuilt sluice binary instead of building ./cmd/sluice.
// SLUICE_E2E_CASES=a,b runs only the named cases.
package e2e
