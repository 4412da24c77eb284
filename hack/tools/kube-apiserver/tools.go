//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver in this module.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
