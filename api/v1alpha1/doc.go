// Package v1alpha1 holds the sluice.dev/v1alpha1 API: LoadBalancerBinding,
// which tells `sluice controller` which ingress pods to register as targets
// of which load balancer, and how to gate their readiness and drain them.
//
// Data flow: LoadBalancerBinding + Pods + Nodes → targets.Desired (pure) →
// diff against the provider → provider apply → pod conditions and status.
//
// +kubebuilder:object:generate=true
// +groupName=sluice.dev
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0 object paths=./...
//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0 crd:crdVersions=v1 paths=./... output:crd:artifacts:config=../../deploy/crds
