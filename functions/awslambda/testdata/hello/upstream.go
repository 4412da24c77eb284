//go:build admitfn_upstream

// Built with -tags admitfn_upstream, the hello-world function links the
// packages of Kubernetes and cel-go that admitfn's core imports
// (test/perf/upstream) and does nothing else with them: the floor of P7 for
// any Lambda function built on kube-apiserver's own policy packages.
package main

import _ "github.com/admitfn/admitfn/test/perf/upstream"
