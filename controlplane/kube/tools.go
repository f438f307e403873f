//go:build tools

// Package tools pins the Kubernetes control-plane commands that
// controlplane/build.sh compiles. It is never built itself; the blank
// imports only keep the packages (and their dependencies) in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
