//go:build admitfn_upstream

// Built with -tags admitfn_upstream, the minimal server links the packages
// of Kubernetes and cel-go that admitfn's core imports (test/perf/upstream)
// and does nothing else with them: the floor of P4 and P6 for any function
// built on kube-apiserver's own policy packages.
package main

import _ "github.com/admitfn/admitfn/test/perf/upstream"
