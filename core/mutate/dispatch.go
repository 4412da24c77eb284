package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/internal/outcome"
)

// Hook is one policy with the bindings that apply on a route, its compiled
// evaluator and its params: upstream's generic.PolicyHook.
type Hook = mutating.PolicyHook

// NewHook assembles a hook. params may be nil when the policy has no
// paramKind.
func NewHook(p *admissionregistrationv1.MutatingAdmissionPolicy, bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding, e mutating.PolicyEvaluator, params *celeval.ParamStore) Hook {
	h := Hook{Policy: p, Bindings: bindings, Evaluator: e}
	if params != nil {
		h.ParamInformer = params
		h.ParamScope = params.Scope()
	}
	return h
}

// Dispatcher applies hooks with upstream's MutatingAdmissionPolicy
// dispatcher.
type Dispatcher struct {
	upstream generic.Dispatcher[Hook]
	objects  admission.ObjectInterfaces
}

// NewDispatcher builds a dispatcher. Namespaces are what the function
// knows of them: their names.
func NewDispatcher() *Dispatcher {
	return newDispatcher(newTypeConverters(), celeval.NamespaceLister())
}

// NewDispatcherWith builds a dispatcher that reads namespaces from
// namespaces: an audit's, which knows them whole.
func NewDispatcherWith(namespaces listersv1.NamespaceLister) *Dispatcher {
	return newDispatcher(newTypeConverters(), namespaces)
}

func newDispatcher(tc *typeConverters, namespaces listersv1.NamespaceLister) *Dispatcher {
	m := matching.NewMatcher(namespaces, nil)
	return &Dispatcher{
		// The dispatcher hands its authorizer to matchers and patchers;
		// admitfn's (reviewMatcher, checked) put the review's in its place,
		// so this one is never asked. It is there because upstream wraps
		// whatever it is given.
		upstream: mutating.NewDispatcher(noAuthorizer{}, m, tc),
		// An empty scheme: objects arrive in the version the webhook asked
		// for (no conversion) and are unstructured (no defaulting; the
		// apiserver defaults the patched object itself).
		objects: admission.NewObjectInterfacesFromScheme(runtime.NewScheme()),
	}
}

// Result is the outcome of one review.
type Result struct {
	Allowed bool
	// Status is set when the request is denied, as kube-apiserver's
	// MutatingAdmissionPolicy plugin returns it.
	Status *metav1.Status
	// Object is the object after every mutation (attrs.GetObject()).
	Object runtime.Object
	// FailedPolicies names the policies with a mutation that failed,
	// whatever their failurePolicy made of it, for logs.
	FailedPolicies []string
	// Acted: a mutation ran (a policy matched past its match conditions),
	// or the request was denied.
	Acted bool
}

// Dispatch applies hooks to attrs' object, in order, each policy seeing the
// previous one's result. The final object replaces attrs' object.
func (d *Dispatcher) Dispatch(ctx context.Context, attrs *celeval.Attributes, hooks []Hook) (Result, error) {
	ctx, tr := outcome.WithTrace(ctx)
	err := d.upstream.Dispatch(ctx, attrs, d.objects, hooks)
	res := Result{Allowed: err == nil, Object: attrs.GetObject(), FailedPolicies: tr.Failed(), Acted: tr.Acted() || err != nil}
	if err == nil {
		return res, nil
	}
	var se *k8serrors.StatusError
	if !errors.As(err, &se) {
		return Result{}, fmt.Errorf("%w: %w", outcome.ErrInternal, err)
	}
	st := se.ErrStatus
	res.Status = &metav1.Status{Status: metav1.StatusFailure, Message: st.Message, Reason: st.Reason, Code: st.Code, Details: st.Details}
	return res, nil
}

// checked wraps one of upstream's patchers. It records failures for the
// review's log line, and decodes a JSON Patch result as kube-apiserver does
// (see decodeStrictly). It gives the patcher what it reads of the review's
// cluster: its authorizer, and the whole namespace when the policy reads
// namespaceObject; a namespace that cannot be read fails the mutation, and
// the policy's failurePolicy decides.
type checked struct {
	patch.Patcher
	policy         string
	jsonPatch      bool
	readsNamespace bool
}

func (c checked) Patch(ctx context.Context, r patch.Request, budget int64) (runtime.Object, error) {
	outcome.Acted(ctx)
	r.OptionalVariables.Authorizer = celeval.ReviewAuthorizer(r.VersionedAttributes)
	var err error
	if c.readsNamespace {
		if r.Namespace, err = celeval.ReviewNamespace(ctx, r.VersionedAttributes, r.Namespace); err != nil {
			outcome.Failure(ctx, c.policy)
			return nil, err
		}
	}
	obj, err := c.Patcher.Patch(ctx, r, budget)
	if err == nil && c.jsonPatch {
		err = decodeStrictly(obj, r.VersionedAttributes.VersionedKind)
	}
	if err != nil {
		outcome.Failure(ctx, c.policy)
	}
	return obj, err
}

// strictJSON is the serializer upstream's JSON Patch mutation decodes its
// result with, over client-go's scheme of the built-in kinds.
var strictJSON = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Strict: true})

// decodeStrictly decodes the result of a JSON Patch as kube-apiserver does.
// In-cluster a built-in object is held in its Go type, and the patched JSON
// is decoded strictly into that type: an unknown field, a wrong type or a
// malformed value (a quantity, a time) is an internal error that fails the
// request whatever the failurePolicy, with the decoder's message. admitfn
// holds objects unstructured; it encodes the result and decodes it into the
// kind's Go type to the same end. A custom resource is unstructured
// in-cluster too, and is not checked.
func decodeStrictly(obj runtime.Object, gvk schema.GroupVersionKind) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !scheme.Scheme.Recognizes(gvk) {
		return nil
	}
	into, err := scheme.Scheme.New(gvk)
	if err != nil {
		return k8serrors.NewInternalError(err)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return k8serrors.NewInternalError(err)
	}
	if _, _, err := strictJSON.Decode(data, nil, into); err != nil {
		return k8serrors.NewInternalError(err)
	}
	return nil
}

// reviewMatcher evaluates a policy's matchConditions with the review's
// authorizer (celeval.ReviewAuthorizer), not the dispatcher's.
type reviewMatcher struct{ matchconditions.Matcher }

func (m reviewMatcher) Match(ctx context.Context, versionedAttr *admission.VersionedAttributes, versionedParams runtime.Object, _ authorizer.UnconditionalAuthorizer) matchconditions.MatchResult {
	return m.Matcher.Match(ctx, versionedAttr, versionedParams, celeval.ReviewAuthorizer(versionedAttr))
}

// noAuthorizer has no opinion and says why.
type noAuthorizer struct{}

func (noAuthorizer) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", errors.New("admitfn has no access to the cluster's authorizer")
}
