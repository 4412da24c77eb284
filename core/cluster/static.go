package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Static is a cluster held in memory: what a test file says the cluster
// holds (admitfn test), read as a function reads a real one.
type Static struct {
	ClusterName string
	Namespaces  map[string]*corev1.Namespace
	// Objects are param objects of any kind.
	Objects []*unstructured.Unstructured
	// Namespaced lists the param kinds that are namespaced; others are
	// cluster-scoped.
	Namespaced map[schema.GroupVersionKind]bool
	// Allow decides authorizer checks; nil denies every one.
	Allow func(authorizer.Attributes) bool
}

var _ Reader = (*Static)(nil)

func (s *Static) Name() string { return s.ClusterName }

func (s *Static) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	ns, ok := s.Namespaces[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return ns, nil
}

func (s *Static) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if s.Allow != nil && s.Allow(a) {
		return authorizer.DecisionAllow, "allowed by the test", nil
	}
	return authorizer.DecisionDeny, "denied by the test", nil
}

func (s *Static) ParamScope(_ context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error) {
	if s.Namespaced[gvk] {
		return meta.RESTScopeNamespace, nil
	}
	return meta.RESTScopeRoot, nil
}

func (s *Static) Param(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	for _, o := range s.Objects {
		if o.GroupVersionKind() == gvk && o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, name)
}

func (s *Static) Params(_ context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range s.Objects {
		if o.GroupVersionKind() == gvk && (namespace == "" || o.GetNamespace() == namespace) && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}
