//go:build tools

// Package kube pins the Kubernetes control-plane binaries sluice's local
// cluster runs. scripts/kube-binaries.sh builds them from this module; the
// imports below let `go mod tidy` record every dependency.
package kube

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)
