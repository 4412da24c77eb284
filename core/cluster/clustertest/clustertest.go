// Package clustertest is an in-memory cluster.Reader for tests: a
// cluster.Static that can fail every read and records what it was asked.
package clustertest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/cluster"
)

// Cluster is a cluster.Static whose reads all fail with Err when it is
// set, and which records the reads it answered.
type Cluster struct {
	cluster.Static
	Err error

	mu    sync.Mutex
	Asked []authorizer.Attributes
	Reads int
}

var _ cluster.Reader = (*Cluster)(nil)

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
	return c.Static.Namespace(ctx, name)
}

func (c *Cluster) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if err := c.read(); err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	c.mu.Lock()
	c.Asked = append(c.Asked, a)
	c.mu.Unlock()
	return c.Static.Authorize(ctx, a)
}

func (c *Cluster) ParamScope(ctx context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.Static.ParamScope(ctx, gvk)
}

func (c *Cluster) Param(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.Static.Param(ctx, gvk, namespace, name)
}

func (c *Cluster) Params(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.Static.Params(ctx, gvk, namespace, selector)
}
