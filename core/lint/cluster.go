package lint

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/admitfn/admitfn/core/policy"
)

// ClusterRead is what one binding reads of the cluster it is enforced in,
// which only a function with cluster access (and kube-apiserver) has.
type ClusterRead struct {
	Binding, Policy string
	// What it reads: "namespaceObject.metadata.labels", "authorizer",
	// "params of kind ConfigMap".
	What []string
}

func (r ClusterRead) String() string {
	return fmt.Sprintf("binding %s (policy %s) reads %s", r.Binding, r.Policy, strings.Join(r.What, ", "))
}

// ClusterReads are the bindings of b that read the cluster, in bundle
// order: namespaceObject beyond metadata.name, the authorizer, or params of
// a kind the bundle carries no object of.
func ClusterReads(b *policy.Set) []ClusterRead {
	carried := map[schema.GroupVersionKind]bool{}
	for _, o := range b.Params {
		carried[o.GroupVersionKind()] = true
	}
	reads := func(exprs []expression, pk *admissionregistrationv1.ParamKind) []string {
		var what []string
		add := func(w string) {
			for _, x := range what {
				if x == w {
					return
				}
			}
			what = append(what, w)
		}
		for _, e := range exprs {
			for _, m := range namespaceRef.FindAllStringSubmatch(e.expression, -1) {
				if path := strings.ReplaceAll(m[1], "?", ""); !strings.HasPrefix(path, ".metadata.name") {
					add("namespaceObject" + path)
				}
			}
			if authorizerRef.MatchString(e.expression) {
				add("authorizer")
			}
		}
		if pk != nil && !carried[schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)] {
			add("params of kind " + pk.Kind + " (the bundle carries none)")
		}
		return what
	}
	var out []ClusterRead
	for _, bd := range b.Bindings {
		if p := b.Policy(bd.Spec.PolicyName); p != nil {
			if what := reads(validatingExpressions(p), p.Spec.ParamKind); len(what) > 0 {
				out = append(out, ClusterRead{bd.Name, p.Name, what})
			}
		}
	}
	for _, bd := range b.MutatingBindings {
		if p := b.MutatingPolicy(bd.Spec.PolicyName); p != nil {
			if what := reads(mutatingExpressions(p), p.Spec.ParamKind); len(what) > 0 {
				out = append(out, ClusterRead{bd.Name, p.Name, what})
			}
		}
	}
	return out
}
