// Package clustertest is an in-memory cluster.Reader for tests: a
// cluster.Static that can fail every read and records what it was asked.
package clustertest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/cluster"
)

// Cluster holds namespaces, params and an authorizer (cluster.Static's
// fields). Err, when set, is every read's answer. It records the reads it
// answered.
type Cluster struct {
	ClusterName string
	Namespaces  map[string]*corev1.Namespace
	Objects     []*unstructured.Unstructured
	Namespaced  map[schema.GroupVersionKind]bool
	Allow       func(authorizer.Attributes) bool
	Err         error

	mu    sync.Mutex
	Asked []authorizer.Attributes
	Reads int
}

var _ cluster.Reader = (*Cluster)(nil)

// static is the cluster the fields describe.
func (c *Cluster) static() *cluster.Static {
	return &cluster.Static{ClusterName: c.ClusterName, Namespaces: c.Namespaces, Objects: c.Objects, Namespaced: c.Namespaced, Allow: c.Allow}
}

func (c *Cluster) Name() string { return c.ClusterName }

func (c *Cluster) read() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Reads++
	return c.Err
}

func (c *Cluster) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.static().Namespace(ctx, name)
}

func (c *Cluster) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if err := c.read(); err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	c.mu.Lock()
	c.Asked = append(c.Asked, a)
	c.mu.Unlock()
	return c.static().Authorize(ctx, a)
}

func (c *Cluster) ParamScope(ctx context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.static().ParamScope(ctx, gvk)
}

func (c *Cluster) Param(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.static().Param(ctx, gvk, namespace, name)
}

func (c *Cluster) Params(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.static().Params(ctx, gvk, namespace, selector)
}
