package httpadapter

import (
	"context"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/cluster"
)

// WithClusters serves the clusters named: each one's URLs carry its name,
// and a review on them reads the cluster through its Reader (nil for a
// cluster the function is given no access to). A path naming any other
// cluster is refused before anything else happens.
func WithClusters(clusters map[string]cluster.Reader) Option {
	return func(h *Handler) { h.clusters = clusters }
}

// clusterOf splits a cluster's path into the cluster's name and the
// route's path. ok is false for a cluster the handler does not serve; a
// path without a cluster is returned as it is, name "".
func (h *Handler) clusterOf(path string) (name, rest string, ok bool) {
	after, isCluster := strings.CutPrefix(path, cluster.PathPrefix)
	if !isCluster {
		return "", path, true
	}
	name, rest, _ = strings.Cut(after, "/")
	if _, served := h.clusters[name]; !served {
		return "", "", false
	}
	return name, "/" + rest, true
}

// countingReader counts the reads of its review that failed, for the
// review's metrics. A NotFound is an answer, not a failure.
type countingReader struct {
	cluster.Reader
	errors atomic.Int32
}

func (c *countingReader) count(err error) {
	if err != nil && !apierrors.IsNotFound(err) {
		c.errors.Add(1)
	}
}

func (c *countingReader) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := c.Reader.Namespace(ctx, name)
	c.count(err)
	return ns, err
}

func (c *countingReader) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := c.Reader.Authorize(ctx, a)
	c.count(err)
	return d, reason, err
}

func (c *countingReader) ParamScope(ctx context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error) {
	s, err := c.Reader.ParamScope(ctx, gvk)
	c.count(err)
	return s, err
}

func (c *countingReader) Param(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	o, err := c.Reader.Param(ctx, gvk, namespace, name)
	c.count(err)
	return o, err
}

func (c *countingReader) Params(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	objs, err := c.Reader.Params(ctx, gvk, namespace, selector)
	c.count(err)
	return objs, err
}
