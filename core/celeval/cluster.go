package celeval

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	admissionauthorizer "k8s.io/apiserver/pkg/admission/plugin/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/admitfn/admitfn/core/cluster"
)

// clusterReads is what one review reads of its cluster: the namespace,
// once, and the authorizer's decisions, each asked once (upstream's
// caching authorizer, as its dispatcher wraps its own for a request).
type clusterReads struct {
	reader cluster.Reader
	authz  authorizer.UnconditionalAuthorizer

	fetched   bool
	namespace *corev1.Namespace
	err       error
}

// UseCluster makes the review read what its policies ask of r: the whole
// namespace for policies that read namespaceObject, and the `authorizer`
// (none from a cluster.NamespacesOnly).
// ctx is the review's: it bounds every read, including the authorizer's,
// which upstream's CEL library calls without a context.
func (a *Attributes) UseCluster(ctx context.Context, r cluster.Reader) {
	a.cluster = &clusterReads{reader: r}
	if _, only := r.(cluster.NamespacesOnly); !only {
		a.cluster.authz = admissionauthorizer.NewCachingAuthorizer(boundAuthorizer{ctx, r})
	}
}

// boundAuthorizer asks the cluster within the review's context.
type boundAuthorizer struct {
	ctx    context.Context
	reader cluster.Reader
}

func (b boundAuthorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	return b.reader.Authorize(b.ctx, attrs)
}

// ReviewAuthorizer is the authorizer of the review va belongs to, nil when
// the review is not for a cluster the function reads: then `authorizer` is
// not resolvable, and an expression that uses it fails.
func ReviewAuthorizer(va *admission.VersionedAttributes) authorizer.UnconditionalAuthorizer {
	if a, ok := va.Attributes.(*Attributes); ok && a.cluster != nil {
		return a.cluster.authz
	}
	return nil
}

// ReviewNamespace is the namespace a policy that reads namespaceObject is
// given: ns (what upstream's dispatcher found: the name only) unless the
// review is for a cluster the function reads, and then the whole Namespace
// from it, read once per review. The error says the namespace could not be
// read, and why.
func ReviewNamespace(ctx context.Context, va *admission.VersionedAttributes, ns *corev1.Namespace) (*corev1.Namespace, error) {
	a, ok := va.Attributes.(*Attributes)
	if !ok || a.cluster == nil || ns == nil {
		return ns, nil
	}
	c := a.cluster
	if !c.fetched {
		c.namespace, c.err = c.reader.Namespace(ctx, ns.Name)
		if c.err != nil {
			c.err = fmt.Errorf("namespaceObject: cannot read namespace %q from cluster %q: %w", ns.Name, c.reader.Name(), c.err)
		}
		// A review past its deadline asks again, and fails again; an
		// answer, or an error of the cluster's, is the review's.
		c.fetched = ctx.Err() == nil
	}
	return c.namespace, c.err
}

var namespaceObjectRef = regexp.MustCompile(`\bnamespaceObject\b`)

// MentionsNamespaceObject reports whether one of exprs names
// namespaceObject: only then is the whole namespace read for it.
func MentionsNamespaceObject(exprs ...string) bool {
	for _, e := range exprs {
		if namespaceObjectRef.MatchString(e) {
			return true
		}
	}
	return false
}

// ClusterParams serves one param kind's objects from the review's cluster
// to upstream's generic.CollectParams, within the review's context (which
// CollectParams does not pass on). scope is the kind's scope in the
// cluster; scopeErr, when the cluster could not say, is every lookup's
// answer. Lists are sorted by namespace and name, as ParamStore's are.
func ClusterParams(ctx context.Context, r cluster.Reader, gvk schema.GroupVersionKind, scopeErr error) informers.GenericInformer {
	return clusterParams{lister: clusterLister{ctx: ctx, reader: r, gvk: gvk, err: scopeErr}}
}

type clusterParams struct{ lister clusterLister }

func (p clusterParams) Lister() cache.GenericLister { return p.lister }

// Informer answers HasSynced: every lookup reads the cluster (through its
// cache), so there is nothing to wait for.
func (clusterParams) Informer() cache.SharedIndexInformer { return syncedInformer{} }

type clusterLister struct {
	ctx       context.Context
	reader    cluster.Reader
	gvk       schema.GroupVersionKind
	namespace string
	err       error
}

func (l clusterLister) List(selector labels.Selector) ([]runtime.Object, error) {
	if l.err != nil {
		return nil, l.err
	}
	objs, err := l.reader.Params(l.ctx, l.gvk, l.namespace, selector)
	if err != nil {
		return nil, l.failed(err, fmt.Sprintf("list %s params selected by %q", l.gvk.Kind, selector.String()))
	}
	objs = slices.Clone(objs)
	sortObjects(objs)
	return objs, nil
}

func (l clusterLister) Get(name string) (runtime.Object, error) {
	if l.err != nil {
		return nil, l.err
	}
	obj, err := l.reader.Param(l.ctx, l.gvk, l.namespace, name)
	if err != nil {
		return nil, l.failed(err, fmt.Sprintf("read %s param %q", l.gvk.Kind, name))
	}
	return obj, nil
}

func (l clusterLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	l.namespace = namespace
	return l
}

// failed words an error reading params; a NotFound is passed as it is, for
// the binding's parameterNotFoundAction.
func (l clusterLister) failed(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return err
	}
	where := ""
	if l.namespace != "" {
		where = fmt.Sprintf(" in namespace %q", l.namespace)
	}
	return fmt.Errorf("cannot %s%s from cluster %q: %w", what, where, l.reader.Name(), err)
}
