// Package integration holds sluice's integration tests (build tag
// `integration`): real HAProxy from Debian in front of several real
// `sluice proxy` processes in manifests mode, with test/echo processes as
// backends, all on loopback. The tests drive load through HAProxy with
// test/load while proxies drain, routes change and endpoints come and go, and
// count every failed request.
//
// Data flow under test: test/load → HAProxy (health-checks each proxy's admin
// /healthz) → sluice proxy (reads the manifests directory the test rewrites)
// → echo backends.
//
//	go test -tags integration ./test/integration/ -v -count=1
package integration
