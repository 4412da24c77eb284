// Package cluster gives a function read-only access to the clusters it
// serves, through client-go: each cluster's namespaces, its authorizer
// (SubjectAccessReview) and its param objects, behind caches bounded in
// entries and age. A deployment names its clusters in ADMITFN_CLUSTERS
// (ParseConfig); the webhook URL of each carries its name.
package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/admitfn/admitfn/core/cluster"
)

// Stats count one cluster's reads since start, for metrics.
type Stats struct {
	hits, reads, errors, evictions atomic.Int64
}

// Counts are a snapshot of Stats.
type Counts struct {
	// Hits were answered from the cache; Reads went to the cluster (one
	// for every caller of a coalesced miss).
	Hits, Reads int64
	// Errors are reads a review got an error for (unreachable, slow,
	// refused, too many in flight): each failed a policy, and its
	// failurePolicy decided.
	Errors int64
	// Evictions dropped an entry because the cache was full.
	Evictions int64
}

// Counts returns the counts so far.
func (s *Stats) Counts() Counts {
	return Counts{Hits: s.hits.Load(), Reads: s.reads.Load(), Errors: s.errors.Load(), Evictions: s.evictions.Load()}
}

// Reader reads one cluster; it implements core/cluster.Reader.
type Reader struct {
	name    string
	client  kubernetes.Interface
	dynamic dynamic.Interface
	mapper  meta.RESTMapper
	stats   *Stats

	namespaces *cache[*corev1.Namespace]
	decisions  *cache[decision]
	mappings   *cache[*meta.RESTMapping]
	params     *cache[runtime.Object]
	lists      *cache[[]runtime.Object]
}

var _ cluster.Reader = (*Reader)(nil)

type decision struct {
	decision authorizer.Decision
	reason   string
}

// NewReader reads the cluster cfg reaches, with the settings of c.
func NewReader(c Cluster, cfg *rest.Config) (*Reader, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "admitfn"
	s := c.withDefaults()
	if cfg.Timeout == 0 {
		// Discovery takes no context: this bounds it (the CLI's
		// kubeconfigs set none).
		cfg.Timeout = s.ReadTimeout.Duration
	}
	// Every read is bounded by the review (and readTimeout); client-go's
	// own rate limiter would queue reviews behind each other.
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	stats := &Stats{}
	slots := make(chan struct{}, s.MaxInFlight)
	return &Reader{
		name: c.Name, client: client, dynamic: dyn, stats: stats,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		namespaces: newCache[*corev1.Namespace](s.NamespaceTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		decisions:  newCache[decision](s.AuthorizerTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		mappings:   newCache[*meta.RESTMapping](s.ParamTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		params:     newCache[runtime.Object](s.ParamTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		lists:      newCache[[]runtime.Object](s.ParamTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
	}, nil
}

// Name is the cluster's name.
func (r *Reader) Name() string { return r.name }

// Stats are the reader's counts.
func (r *Reader) Stats() *Stats { return r.stats }

// Namespace reads a namespace.
func (r *Reader) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	// The name comes from the review's body: one no namespace can have is
	// answered without a read, so a caller cannot make the function ask
	// the cluster for (and cache) arbitrary strings.
	if len(validation.IsDNS1123Label(name)) > 0 {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, clip(name, 70))
	}
	return r.namespaces.get(ctx, name, func(ctx context.Context) (*corev1.Namespace, error) {
		ns, err := r.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return ns, readError(err)
	})
}

// Authorize asks the cluster with a SubjectAccessReview, as the user of the
// attributes.
func (r *Reader) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := subjectAccessReview(a)
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	d, err := r.decisions.get(ctx, string(key), func(ctx context.Context) (decision, error) {
		res, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return decision{}, readError(err)
		}
		switch {
		case res.Status.Allowed:
			return decision{authorizer.DecisionAllow, res.Status.Reason}, nil
		case res.Status.Denied:
			return decision{authorizer.DecisionDeny, res.Status.Reason}, nil
		}
		return decision{authorizer.DecisionNoOpinion, res.Status.Reason}, nil
	})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("cannot ask cluster %q: %w", r.name, err)
	}
	return d.decision, d.reason, nil
}

// subjectAccessReview is the review kube-apiserver's webhook authorizer
// would send for a.
func subjectAccessReview(a authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	var spec authorizationv1.SubjectAccessReviewSpec
	if u := a.GetUser(); u != nil {
		spec.User, spec.UID, spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			spec.Extra = map[string]authorizationv1.ExtraValue{}
			for k, v := range extra {
				spec.Extra[k] = v
			}
		}
	}
	if !a.IsResourceRequest() {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
		return spec
	}
	ra := &authorizationv1.ResourceAttributes{
		Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
		Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName(),
	}
	if reqs, err := a.GetFieldSelector(); err == nil && len(reqs) > 0 {
		fs := &authorizationv1.FieldSelectorAttributes{}
		for _, r := range reqs {
			fs.Requirements = append(fs.Requirements, metav1.FieldSelectorRequirement{Key: r.Field, Operator: fieldOperator(string(r.Operator)), Values: []string{r.Value}})
		}
		ra.FieldSelector = fs
	}
	if reqs, err := a.GetLabelSelector(); err == nil && len(reqs) > 0 {
		ls := &authorizationv1.LabelSelectorAttributes{}
		for _, r := range reqs {
			ls.Requirements = append(ls.Requirements, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: labelOperator(string(r.Operator())), Values: slices.Sorted(slices.Values(r.ValuesUnsorted()))})
		}
		ra.LabelSelector = ls
	}
	spec.ResourceAttributes = ra
	return spec
}

func fieldOperator(op string) metav1.FieldSelectorOperator {
	if op == "!=" {
		return metav1.FieldSelectorOpNotIn
	}
	return metav1.FieldSelectorOpIn
}

func labelOperator(op string) metav1.LabelSelectorOperator {
	switch op {
	case "!=", "notin":
		return metav1.LabelSelectorOpNotIn
	case "exists":
		return metav1.LabelSelectorOpExists
	case "!":
		return metav1.LabelSelectorOpDoesNotExist
	}
	return metav1.LabelSelectorOpIn
}

// ParamScope asks the cluster's discovery whether a kind is namespaced.
func (r *Reader) ParamScope(ctx context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error) {
	m, err := r.mapping(ctx, gvk)
	if err != nil {
		return nil, err
	}
	return m.Scope, nil
}

func (r *Reader) mapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	return r.mappings.get(ctx, gvk.String(), func(context.Context) (*meta.RESTMapping, error) {
		// Discovery takes no context: rest.Config.Timeout bounds it.
		m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		return m, readError(err)
	})
}

// Param reads one param object.
func (r *Reader) Param(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	m, err := r.mapping(ctx, gvk)
	if err != nil {
		return nil, err
	}
	return r.params.get(ctx, gvk.String()+"/"+namespace+"/"+name, func(ctx context.Context) (runtime.Object, error) {
		o, err := r.dynamic.Resource(m.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, readError(err)
		}
		return o, nil
	})
}

// Params lists the param objects selector selects.
func (r *Reader) Params(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	m, err := r.mapping(ctx, gvk)
	if err != nil {
		return nil, err
	}
	sel := selector.String()
	return r.lists.get(ctx, gvk.String()+"/"+namespace+"?"+sel, func(ctx context.Context) ([]runtime.Object, error) {
		list, err := r.dynamic.Resource(m.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, readError(err)
		}
		out := make([]runtime.Object, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	})
}

// readError words what client-go returns: a NotFound stays one (the
// binding's parameterNotFoundAction, a deleted namespace); anything else
// makes the cluster unavailable for the read.
func readError(err error) error {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return err
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: the cluster refused the function's credentials (401)", cluster.ErrUnavailable)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: the function's credentials may not read this (403): %s", cluster.ErrUnavailable, clip(err.Error(), 300))
	}
	return fmt.Errorf("%w: %s", cluster.ErrUnavailable, clip(err.Error(), 300))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Duration is a time.Duration written as "30s" in a configuration.
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\": %w", err)
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }
