package celeval

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// ParamStore serves one paramKind's objects from the bundle to upstream's
// generic.CollectParams, which expects an informer. Listing is sorted by
// namespace and name so that, unlike an informer cache, the order in which
// several params are evaluated (and so which denial is reported first) is
// deterministic.
type ParamStore struct {
	lister cache.GenericLister
	scope  meta.RESTScope
	empty  bool
}

var _ informers.GenericInformer = (*ParamStore)(nil)

// NewParamStore indexes objs (all of one kind). Namespaced decides the
// RESTScope upstream uses to resolve paramRef.namespace.
func NewParamStore(gvk schema.GroupVersionKind, namespaced bool, objs []*unstructured.Unstructured) *ParamStore {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		// Keys are unique: the bundle rejects duplicates.
		_ = indexer.Add(o)
	}
	scope := meta.RESTScopeRoot
	if namespaced {
		scope = meta.RESTScopeNamespace
	}
	gr := schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}
	return &ParamStore{lister: sortedLister{cache.NewGenericLister(indexer, gr)}, scope: scope, empty: len(objs) == 0}
}

// Empty reports whether the bundle carries no object of the kind: a review
// for a cluster the function reads takes the kind's params from the
// cluster instead (ClusterParams).
func (s *ParamStore) Empty() bool { return s.empty }

// Scope is the RESTScope of the param kind.
func (s *ParamStore) Scope() meta.RESTScope { return s.scope }

// Lister implements informers.GenericInformer.
func (s *ParamStore) Lister() cache.GenericLister { return s.lister }

// Informer implements informers.GenericInformer. CollectParams only asks it
// whether it has synced; a bundle is complete before it is served.
func (s *ParamStore) Informer() cache.SharedIndexInformer { return syncedInformer{} }

// syncedInformer answers HasSynced; CollectParams calls nothing else.
type syncedInformer struct {
	cache.SharedIndexInformer
}

func (syncedInformer) HasSynced() bool { return true }

type sortedLister struct{ cache.GenericLister }

func (l sortedLister) List(selector labels.Selector) ([]runtime.Object, error) {
	objs, err := l.GenericLister.List(selector)
	sortObjects(objs)
	return objs, err
}

func (l sortedLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return sortedNamespaceLister{l.GenericLister.ByNamespace(namespace)}
}

type sortedNamespaceLister struct{ cache.GenericNamespaceLister }

func (l sortedNamespaceLister) List(selector labels.Selector) ([]runtime.Object, error) {
	objs, err := l.GenericNamespaceLister.List(selector)
	sortObjects(objs)
	return objs, err
}

func sortObjects(objs []runtime.Object) {
	key := func(o runtime.Object) string {
		m, err := meta.Accessor(o)
		if err != nil {
			return ""
		}
		return m.GetNamespace() + "/" + m.GetName()
	}
	sort.Slice(objs, func(i, j int) bool { return key(objs[i]) < key(objs[j]) })
}

// nameOnlyNamespaces is the namespace lister the matcher and dispatcher get:
// the function cannot read the cluster, so a namespace is known by its name
// only. Namespace selectors are evaluated by kube-apiserver (see
// policy.Group) and removed before matching, so labels are never needed here.
type nameOnlyNamespaces struct{}

// NamespaceLister is the lister of namespaces known by name only, for
// matchers outside this package.
func NamespaceLister() listersv1.NamespaceLister { return nameOnlyNamespaces{} }

var _ listersv1.NamespaceLister = nameOnlyNamespaces{}

func (nameOnlyNamespaces) List(labels.Selector) ([]*corev1.Namespace, error) { return nil, nil }

func (nameOnlyNamespaces) Get(name string) (*corev1.Namespace, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}
