// Package cluster gives a function read-only access to the clusters it
// serves, through client-go: each cluster's namespaces, its authorizer
// (SubjectAccessReview) and its param objects, behind caches bounded in
// entries and age. A deployment names its clusters in ADMITFN_CLUSTERS
// (ParseConfig); the webhook URL of each carries its name.
package cluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation/path"
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
	mapper  meta.ResettableRESTMapper
	stats   *Stats
	log     zerolog.Logger
	now     func() time.Time

	// lastReset is when discovery was last read again for a kind it did
	// not know (unix nanoseconds): at most once every rediscoverEvery.
	lastReset atomic.Int64

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
	namespaces := newCache[*corev1.Namespace](s.NamespaceTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats)
	namespaces.forgetNotFound = true
	return &Reader{
		name: c.Name, client: client, dynamic: dyn, stats: stats, log: zerolog.Nop(), now: time.Now,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		namespaces: namespaces,
		decisions:  newCache[decision](s.AuthorizerTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		mappings:   newCache[*meta.RESTMapping](s.ParamTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		params:     newCache[runtime.Object](s.ParamTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
		lists:      newCache[[]runtime.Object](s.ParamTTL.Duration, s.CacheEntries, s.ReadTimeout.Duration, slots, stats),
	}, nil
}

// SetLog sets where a failed read's details go (the API URL, the
// server's answer): review answers carry only what the policy author
// needs.
func (r *Reader) SetLog(log zerolog.Logger) { r.log = log.With().Str("cluster", r.name).Logger() }

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
		return ns, r.readError("namespace "+name, err)
	})
}

// Authorize asks the cluster with a SubjectAccessReview, as the user of the
// attributes.
func (r *Reader) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := subjectAccessReview(a)
	if n := userInfoSize(spec); n > MaxUserInfoBytes {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("cannot ask cluster %q: %w: the request's user, groups and extra take %d bytes, more than kube-apiserver reads in the request headers any identity arrives in (%d): not sent", r.name, cluster.ErrUnavailable, n, MaxUserInfoBytes)
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	d, err := r.decisions.get(ctx, string(key), func(ctx context.Context) (decision, error) {
		res, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return decision{}, r.readError("subjectaccessreview", err)
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

// MaxUserInfoBytes bounds the user, groups and extra a review's userInfo
// may carry into a SubjectAccessReview: every identity kube-apiserver
// authenticates reaches it in request headers (a bearer token, a client
// certificate, an authenticating proxy's or impersonation headers), which
// it reads up to 1 MiB. A larger one comes from no kube-apiserver, so it
// is refused without a read.
const MaxUserInfoBytes = 1 << 20

func userInfoSize(spec authorizationv1.SubjectAccessReviewSpec) int {
	n := len(spec.User) + len(spec.UID)
	for _, g := range spec.Groups {
		n += len(g)
	}
	for k, vs := range spec.Extra {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
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

// rediscoverEvery bounds how often a kind discovery does not know makes
// the reader read discovery again: a CRD created after the function
// started is found within it, and a stream of unknown kinds costs at most
// one discovery read each time.
const rediscoverEvery = 10 * time.Second

func (r *Reader) mapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	return r.mappings.get(ctx, gvk.String(), func(context.Context) (*meta.RESTMapping, error) {
		// Discovery takes no context: rest.Config.Timeout bounds it.
		m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) && r.rediscover() {
			m, err = r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("%w: the cluster serves no kind %s", cluster.ErrUnavailable, gvk)
		}
		return m, r.readError("discovery", err)
	})
}

// rediscover resets the cached discovery unless that was done less than
// rediscoverEvery ago; it reports whether it did.
func (r *Reader) rediscover() bool {
	now := r.now().UnixNano()
	last := r.lastReset.Load()
	if now-last < int64(rediscoverEvery) || !r.lastReset.CompareAndSwap(last, now) {
		return false
	}
	r.mapper.Reset()
	return true
}

// objectName reports whether an object of any kind could be named name
// in namespace: what kube-apiserver stores every object by (a path segment
// of at most 253 bytes, in a namespace that is a DNS label). Other names
// come from a review's body; they are answered not found without a read.
func objectName(namespace, name string) bool {
	return len(name) <= validation.DNS1123SubdomainMaxLength && len(path.IsValidPathSegmentName(name)) == 0 && name != "" &&
		(namespace == "" || len(validation.IsDNS1123Label(namespace)) == 0)
}

// Param reads one param object.
func (r *Reader) Param(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	m, err := r.mapping(ctx, gvk)
	if err != nil {
		return nil, err
	}
	if !objectName(namespace, name) {
		return nil, apierrors.NewNotFound(m.Resource.GroupResource(), clip(name, 70))
	}
	return r.params.get(ctx, gvk.String()+"/"+namespace+"/"+name, func(ctx context.Context) (runtime.Object, error) {
		o, err := r.dynamic.Resource(m.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, r.readError(m.Resource.Resource+" "+namespace+"/"+name, err)
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
	if namespace != "" && !objectName(namespace, "x") {
		return nil, nil // a namespace no object can be in holds none
	}
	sel := selector.String()
	return r.lists.get(ctx, gvk.String()+"/"+namespace+"?"+sel, func(ctx context.Context) ([]runtime.Object, error) {
		list, err := r.dynamic.Resource(m.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, r.readError(m.Resource.Resource+" in "+namespace, err)
		}
		out := make([]runtime.Object, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	})
}

// bearer finds a bearer token an answer may echo (an endpoint that returns
// the request's headers): the log keeps the rest.
var bearerToken = regexp.MustCompile(`(?i)bearer\s+[^\s"',;]+`)

// readError words what client-go returns: a NotFound stays one (the
// binding's parameterNotFoundAction, a deleted namespace); anything else
// makes the cluster unavailable for the read, said as its class (401,
// 403, HTTP status, unreachable, no answer). The text client-go gives
// (the API URL, the function's identity, the server's body, which an
// endpoint at the configured address could fill with the request's
// headers) goes to the log, never into a review's answer.
func (r *Reader) readError(what string, err error) error {
	if err == nil || apierrors.IsNotFound(err) {
		return err
	}
	r.log.Warn().Str("read", clip(what, 300)).Str("error", bearerToken.ReplaceAllString(clip(err.Error(), 2000), "Bearer [redacted]")).Msg("cluster read failed")
	var status apierrors.APIStatus
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: the cluster refused the function's credentials (401)", cluster.ErrUnavailable)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: the function's credentials may not read this (403)", cluster.ErrUnavailable)
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return fmt.Errorf("%w: no answer in time", cluster.ErrUnavailable)
	case errors.As(err, &status) && status.Status().Code != 0:
		return fmt.Errorf("%w: the cluster answered HTTP %d", cluster.ErrUnavailable, status.Status().Code)
	}
	var (
		unknownCA x509.UnknownAuthorityError
		badHost   x509.HostnameError
		badCert   x509.CertificateInvalidError
		netErr    net.Error
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &badCert):
		return fmt.Errorf("%w: the cluster's certificate does not verify", cluster.ErrUnavailable)
	case errors.As(err, &netErr):
		return fmt.Errorf("%w: the cluster could not be reached", cluster.ErrUnavailable)
	}
	return fmt.Errorf("%w: the read failed (the function's log says why)", cluster.ErrUnavailable)
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
