// Package clustertest is an in-memory cluster.Reader, for tests of what
// policies read of a cluster; functions/cluster reads real ones.
package clustertest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/cluster"
)

// Cluster holds namespaces, params and an authorizer. Err, when set, is
// every read's answer. It records the reads it answered.
type Cluster struct {
	ClusterName string
	Namespaces  map[string]*corev1.Namespace
	// Objects are param objects of any kind.
	Objects []*unstructured.Unstructured
	// Namespaced lists the param kinds that are namespaced; others are
	// cluster-scoped.
	Namespaced map[schema.GroupVersionKind]bool
	// Allow decides authorizer checks; nil denies every one.
	Allow func(authorizer.Attributes) bool
	Err   error

	mu    sync.Mutex
	Asked []authorizer.Attributes
	Reads int
}

var _ cluster.Reader = (*Cluster)(nil)

func (c *Cluster) Name() string { return c.ClusterName }

func (c *Cluster) read() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Reads++
	return c.Err
}

func (c *Cluster) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	ns, ok := c.Namespaces[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return ns, nil
}

func (c *Cluster) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if err := c.read(); err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	c.mu.Lock()
	c.Asked = append(c.Asked, a)
	c.mu.Unlock()
	if c.Allow != nil && c.Allow(a) {
		return authorizer.DecisionAllow, "allowed by the test", nil
	}
	return authorizer.DecisionDeny, "denied by the test", nil
}

func (c *Cluster) ParamScope(_ context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	if c.Namespaced[gvk] {
		return meta.RESTScopeNamespace, nil
	}
	return meta.RESTScopeRoot, nil
}

func (c *Cluster) Param(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	for _, o := range c.Objects {
		if o.GroupVersionKind() == gvk && o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, name)
}

func (c *Cluster) Params(_ context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, o := range c.Objects {
		if o.GroupVersionKind() == gvk && (namespace == "" || o.GetNamespace() == namespace) && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}
