// Package direct holds the end-to-end test of `sluice proxy` reading a real
// cluster without a load balancer or controller in front: the proxy runs on
// the host with --kubeconfig against the local cluster of test/cluster and
// routes to echo pods in the simulated nodes' network namespaces, while the
// echo Deployment scales under load (build tag e2e; root).
//
//	load (test/load) ─► sluice proxy 127.0.0.1 ─► echo pods 10.244.x.y
//	                          ▲ informers
//	                    kube-apiserver
package direct
