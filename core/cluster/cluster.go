// Package cluster is what a review may read of the cluster that sent it:
// its namespaces (namespaceObject), its authorizer (the CEL `authorizer`)
// and its param objects. The engine finds the cluster in the review's
// context; functions/cluster reads real clusters through client-go.
package cluster

import (
	"context"
	"errors"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Reader reads one cluster. Every call is bounded by ctx, which carries
// the review's deadline. Errors say what could not be read and why, in
// words fit for a denial message: never a credential.
type Reader interface {
	// Name is the cluster's name, as the webhook URL carries it.
	Name() string
	// Namespace returns the whole Namespace, as kube-apiserver's informer
	// holds it.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// Authorize asks the cluster's authorizer (a SubjectAccessReview).
	Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)
	// ParamScope is how the cluster serves a param kind: namespaced or
	// cluster-scoped.
	ParamScope(ctx context.Context, gvk schema.GroupVersionKind) (meta.RESTScope, error)
	// Param returns one param object; a missing one is a NotFound error
	// (k8s.io/apimachinery/pkg/api/errors).
	Param(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error)
	// Params lists the param objects selector selects, in namespace ("" for
	// a cluster-scoped kind, or all namespaces).
	Params(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error)
}

// NamespacesOnly marks a Reader that knows a cluster's namespaces and
// nothing else, such as the CLI's model of one built from its input: reviews
// read whole namespaces from it, and have no authorizer and no params but
// the bundle's, as a function without cluster access.
type NamespacesOnly interface{ NamespacesOnly() }

// ErrUnavailable marks an error reading the cluster (unreachable, slow,
// refused credentials, too many reads in flight): the policy that needed
// the value fails, and its failurePolicy decides.
var ErrUnavailable = errors.New("cluster unavailable")

type contextKey struct{}

// NewContext returns ctx carrying r: the cluster the review is for.
func NewContext(ctx context.Context, r Reader) context.Context {
	return context.WithValue(ctx, contextKey{}, r)
}

// FromContext returns the cluster ctx carries, nil when the review is not
// for a cluster the function can read.
func FromContext(ctx context.Context) Reader {
	r, _ := ctx.Value(contextKey{}).(Reader)
	return r
}

// PathPrefix starts a cluster's webhook URLs:
// <function>/clusters/<name>/validate/<group>.
const PathPrefix = "/clusters/"

// namePattern is a DNS label: a cluster's name is one path segment.
var namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidName reports whether name can name a cluster: a DNS label (a-z, 0-9
// and -, at most 63).
func ValidName(name string) bool { return namePattern.MatchString(name) }
