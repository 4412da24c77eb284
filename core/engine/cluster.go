package engine

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/cluster"
)

// useCluster prepares a review for the cluster ctx names, if the function
// reads it (cluster.FromContext): the attributes read its namespace and
// authorizer, and hooks whose param kind the bundle carries no object of
// take their params from the cluster. Params the bundle carries are the
// ones served: they are what was reviewed and signed. hooks is copied
// before it is changed.
func useCluster[P runtime.Object, B runtime.Object, E generic.Evaluator](ctx context.Context, attrs *celeval.Attributes, hooks []generic.PolicyHook[P, B, E], paramKind func(P) *admissionregistrationv1.ParamKind) []generic.PolicyHook[P, B, E] {
	r := cluster.FromContext(ctx)
	if r == nil {
		return hooks
	}
	attrs.UseCluster(ctx, r)
	if _, only := r.(cluster.NamespacesOnly); only {
		return hooks
	}
	copied := false
	for i, h := range hooks {
		store, ok := h.ParamInformer.(*celeval.ParamStore)
		if !ok || !store.Empty() {
			continue
		}
		pk := paramKind(h.Policy)
		gvk := schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)
		scope, err := r.ParamScope(ctx, gvk)
		if err != nil {
			// CollectParams needs a scope before it looks anything up;
			// every lookup fails with the error.
			scope = store.Scope()
			err = fmt.Errorf("cannot tell whether %s params are namespaced in cluster %q: %w", gvk.Kind, r.Name(), err)
		}
		if !copied {
			hooks, copied = append([]generic.PolicyHook[P, B, E](nil), hooks...), true
		}
		hooks[i].ParamInformer = celeval.ClusterParams(ctx, r, gvk, err)
		hooks[i].ParamScope = scope
	}
	return hooks
}
