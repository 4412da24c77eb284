// Package engine is the one API adapters call: a compiled bundle that turns a
// decoded AdmissionReview request on a route into an AdmissionResponse with
// the decision kube-apiserver's own ValidatingAdmissionPolicy would make
// (validating routes), or the mutations its MutatingAdmissionPolicy would
// apply, as one JSON Patch (mutating routes).
package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"

	"github.com/wI2L/jsondiff"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	listersv1 "k8s.io/client-go/listers/core/v1"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/internal/parallel"
	"github.com/admitfn/admitfn/core/mutate"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/validate"
)

// Errors a caller must answer with a failed call (an HTTP error status), so
// that the webhook's failurePolicy decides, never with a denial.
var (
	// ErrUnknownRoute: the route names a group the bundle doesn't have; the
	// webhook configuration and the bundle have drifted apart.
	ErrUnknownRoute = errors.New("unknown policy group")
	// ErrRetiredRoute: the route is one an earlier bundle served, whose
	// transition is over; the webhook configuration is stale.
	ErrRetiredRoute = errors.New("retired policy group")
	// ErrInternal: evaluation itself failed.
	ErrInternal = validate.ErrInternal
	// ErrNoBundle: no bundle is loaded yet (its store could not be read),
	// so nothing can be decided.
	ErrNoBundle = errors.New("no policy bundle loaded")
)

// NoBundleError is ErrNoBundle with the reason, in words fit for the
// caller: that the store could not be read, or which check refused the
// bundle it holds.
type NoBundleError struct{ Reason string }

func (e *NoBundleError) Error() string { return ErrNoBundle.Error() + ": " + e.Reason }

func (e *NoBundleError) Is(target error) bool { return target == ErrNoBundle }

// RouteState says how a function serves a route.
type RouteState string

const (
	// RouteServed: a group of the bundle serving reviews.
	RouteServed RouteState = ""
	// RouteRetired: a group of an earlier bundle, served with it while
	// the transition after the publish that retired it lasts.
	RouteRetired RouteState = "retired"
	// RouteEnded: a retired route whose transition is over.
	RouteEnded RouteState = "ended"
	// RouteUnknown: no bundle's.
	RouteUnknown RouteState = "unknown"
)

// Reviewer is what adapters need from an engine.
type Reviewer interface {
	Review(ctx context.Context, route policy.Route, req *review.Request) (*Result, error)
}

var _ Reviewer = (*Engine)(nil)

// Engine is a compiled bundle. It is immutable and safe for concurrent use.
type Engine struct {
	bundle     *policy.Set
	routes     map[policy.Route]*route
	order      []*policy.Group
	dispatcher *validate.Dispatcher
	mutator    *mutate.Dispatcher
	// deferred holds what NewDeferred left to compile; nil from New.
	deferred *pending
}

type route struct {
	group *policy.Group
	// The route's hooks in bundle order, indexed by the resources and
	// operations their policies match.
	validating *index[validate.Hook]
	mutating   *index[mutate.Hook]
}

// Result is a review's response plus what a log line needs.
type Result struct {
	Response *admissionv1.AdmissionResponse
	// FailedPolicies had a failed validation, a failed mutation or an error
	// (whatever their validationActions or failurePolicy made of it).
	FailedPolicies []string
	// Idle: no binding of the route acted on the request (none matched,
	// or every one's match conditions left it out): kube-apiserver called
	// the function for nothing.
	Idle bool
}

// Load parses the bundle under dir in fsys and builds its engine.
func Load(fsys fs.FS, dir string, c *celeval.Compiler) (*Engine, *policy.Set, error) {
	b, err := policy.LoadFS(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	e, err := New(b, c)
	if err != nil {
		return nil, nil, err
	}
	return e, b, nil
}

// New compiles every policy of b. A bundle with any compile error is rejected
// as a whole: the error is a policy.Errors listing every problem as
// "<file>: policy <name>: <field>: <CEL error>".
func New(b *policy.Set, c *celeval.Compiler) (*Engine, error) {
	return build(b, c, false)
}

// NewDeferred builds b's engine without compiling its policies: each
// compiles when a review first needs it (that review waits for it alone),
// or in CompileAll, whichever comes first. It is for bundles already known
// to compile (admitfn push compiled them with the same versions): a policy
// that does not compile is not reported here, and fails as kube-apiserver
// fails a stored policy whose expressions no longer compile, by its
// failurePolicy. Other errors (params) are reported as by New.
func NewDeferred(b *policy.Set, c *celeval.Compiler) (*Engine, error) {
	return build(b, c, true)
}

func build(b *policy.Set, c *celeval.Compiler, deferred bool) (*Engine, error) {
	var errs policy.Errors
	// ApplyConfiguration mutations need client-go's schema of the built-in
	// kinds, whose parse takes longer than compiling most bundles:
	// it starts now and goes on in the background, so validating reviews
	// and JSON Patches, which never read it, do not wait for it; the first
	// ApplyConfiguration waits for what is left of it.
	if slices.ContainsFunc(b.MutatingPolicies, mutate.NeedsSchema) {
		go mutate.Warm()
	}
	compileValidator := func(p *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, []*celeval.ExpressionError) {
		return validate.Compile(c, p)
	}
	compileMutator := func(p *admissionregistrationv1.MutatingAdmissionPolicy) (mutating.PolicyEvaluator, []*celeval.ExpressionError) {
		return mutate.Compile(c, p)
	}
	e := &Engine{
		bundle:     b,
		routes:     map[policy.Route]*route{},
		order:      append(b.Groups(), b.MutatingGroups()...),
		dispatcher: validate.NewDispatcher(),
		mutator:    mutate.NewDispatcher(),
	}
	var (
		validators map[string]validating.Validator
		mutators   map[string]mutating.PolicyEvaluator
	)
	if deferred {
		validators = map[string]validating.Validator{}
		mutators = map[string]mutating.PolicyEvaluator{}
		e.deferred = &pending{
			validators:  map[string]*onUse[validating.Validator]{},
			mutators:    map[string]*onUse[mutating.PolicyEvaluator]{},
			firstReview: make(chan struct{}),
		}
		for _, p := range b.Policies {
			v := &lazyValidator{onUse: newOnUse(&e.deferred.left, b, "ValidatingAdmissionPolicy", p, compileValidator)}
			validators[p.Name] = v
			e.deferred.validators[p.Name] = v.onUse
			e.deferred.all = append(e.deferred.all, v.compile)
		}
		for _, p := range b.MutatingPolicies {
			m := newOnUse(&e.deferred.left, b, "MutatingAdmissionPolicy", p, compileMutator)
			e.deferred.mutators[p.Name] = m
			e.deferred.all = append(e.deferred.all, m.compile)
		}
	} else {
		var verrs, merrs policy.Errors
		validators, verrs = compileAll(b, "ValidatingAdmissionPolicy", b.Policies, compileValidator)
		mutators, merrs = compileAll(b, "MutatingAdmissionPolicy", b.MutatingPolicies, compileMutator)
		errs = append(append(errs, verrs...), merrs...)
	}
	stores, storeErrs := paramStores(b)
	errs = append(errs, storeErrs...)
	if len(errs) > 0 {
		return nil, errs.Capped()
	}
	store := func(pk *admissionregistrationv1.ParamKind) *celeval.ParamStore {
		if pk == nil {
			return nil
		}
		return stores[schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)]
	}

	for _, g := range e.order {
		r := &route{group: g}
		// Hooks follow bundle order: mutating policies apply in it.
		hooks := groupHooks(b.Policies, g.Bindings, validating.NewValidatingAdmissionPolicyAccessor, validating.NewValidatingAdmissionPolicyBindingAccessor, func(p *admissionregistrationv1.ValidatingAdmissionPolicy, bs []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) validate.Hook {
			return validate.NewHook(p, bs, validators[p.Name], store(p.Spec.ParamKind))
		})
		mutatingHooks := groupHooks(b.MutatingPolicies, g.MutatingBindings, mutating.NewMutatingAdmissionPolicyAccessor, mutating.NewMutatingAdmissionPolicyBindingAccessor, func(p *admissionregistrationv1.MutatingAdmissionPolicy, bs []*admissionregistrationv1.MutatingAdmissionPolicyBinding) mutate.Hook {
			return mutate.NewHook(p, bs, mutators[p.Name], store(p.Spec.ParamKind))
		})
		r.validating = newIndex(hooks, func(h validate.Hook) *admissionregistrationv1.MatchResources { return h.Policy.Spec.MatchConstraints })
		r.mutating = newIndex(mutatingHooks, func(h mutate.Hook) *admissionregistrationv1.MatchResources { return h.Policy.Spec.MatchConstraints })
		e.routes[g.Route()] = r
		if g.Default {
			// The bare prefix, for requests sent by hand: whatever the
			// default group holds now. Rendered configurations name the
			// group's ID.
			e.routes[policy.Route{Type: g.Type}] = r
		}
	}
	return e, nil
}

// BundleID identifies the bundle the engine serves.
func (e *Engine) BundleID() string { return e.bundle.ID }

// WithNamespaces returns the engine reading namespaces (namespaceObject,
// and binding namespace selectors) from namespaces instead of knowing only
// their names, as the function does: an audit of a cluster, which lists
// them whole, sees what kube-apiserver's own policies would.
func (e *Engine) WithNamespaces(namespaces listersv1.NamespaceLister) *Engine {
	c := *e
	c.dispatcher = validate.NewDispatcherWith(namespaces)
	c.mutator = mutate.NewDispatcherWith(namespaces)
	return &c
}

// Policies is the parsed bundle the engine serves; callers must not modify it.
func (e *Engine) Policies() *policy.Set { return e.bundle }

// Groups are the bundle's webhook groups: validating ones first, then
// mutating ones, each type's default group first.
func (e *Engine) Groups() []*policy.Group { return e.order }

// HasRoute reports whether rt is a group of the bundle.
func (e *Engine) HasRoute(rt policy.Route) bool {
	_, ok := e.routes[rt]
	return ok
}

// Review evaluates req against the bindings of route. Denials and policy
// errors are responses; the returned error is only ErrUnknownRoute,
// ErrInternal, or the context's error when the deadline passed before a
// decision. A review whose context names a cluster the function reads
// (cluster.NewContext) reads namespaceObject, the authorizer and the params
// the bundle does not carry from that cluster.
func (e *Engine) Review(ctx context.Context, rt policy.Route, req *review.Request) (*Result, error) {
	r, ok := e.routes[rt]
	if !ok {
		return nil, fmt.Errorf("%w %q: the webhook configuration does not match the bundle (%s); render it again", ErrUnknownRoute, rt.Path(), e.bundle.ID)
	}
	if e.deferred != nil {
		defer e.deferred.reviewed()
	}
	if rt.Type == policy.Mutating {
		return e.mutate(ctx, r, req)
	}
	attrs := celeval.NewAttributes(req)
	hooks := r.validating.candidates(attrs)
	if e.deferred != nil {
		prepare(e.deferred, e.deferred.validators, hooks, func(h validate.Hook) string { return h.Policy.Name })
	}
	hooks = useCluster(ctx, attrs, hooks, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ParamKind {
		return p.Spec.ParamKind
	})
	res, err := e.dispatcher.Dispatch(ctx, attrs, hooks)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Expressions were interrupted: the answer would be an artefact of
		// the deadline, not of the policies.
		return nil, fmt.Errorf("review did not finish in time: %w", err)
	}
	resp := &admissionv1.AdmissionResponse{UID: types.UID(req.UID), Allowed: res.Allowed, Warnings: res.Warnings}
	if !res.Allowed {
		resp.Result = res.Status
	}
	if len(res.AuditAnnotationKeys) > 0 {
		resp.AuditAnnotations = map[string]string{}
		for _, k := range res.AuditAnnotationKeys {
			resp.AuditAnnotations[webhookAuditKey(k)] = res.AuditAnnotations[k]
		}
	}
	return &Result{Response: resp, FailedPolicies: res.FailedPolicies, Idle: !res.Acted}, nil
}

// mutate applies the route's mutating policies and answers with one JSON
// Patch from the object received to the final one, or none when nothing
// changed.
func (e *Engine) mutate(ctx context.Context, r *route, req *review.Request) (*Result, error) {
	resp := &admissionv1.AdmissionResponse{UID: types.UID(req.UID), Allowed: true}
	// kube-apiserver's plugin handles CREATE, UPDATE and CONNECT only: a
	// DELETE has no object to mutate.
	switch admissionv1.Operation(req.Operation) {
	case admissionv1.Create, admissionv1.Update, admissionv1.Connect:
	default:
		return &Result{Response: resp, Idle: true}, nil
	}
	if req.Object == nil {
		return &Result{Response: resp, Idle: true}, nil
	}
	attrs := celeval.NewAttributes(req)
	hooks := r.mutating.candidates(attrs)
	if len(hooks) == 0 {
		// No policy of the route can match: nothing to encode or compare.
		return &Result{Response: resp, Idle: true}, nil
	}
	if e.deferred != nil {
		prepare(e.deferred, e.deferred.mutators, hooks, func(h mutate.Hook) string { return h.Policy.Name })
		hooks = e.deferred.compiled(hooks)
	}
	hooks = useCluster(ctx, attrs, hooks, func(p *admissionregistrationv1.MutatingAdmissionPolicy) *admissionregistrationv1.ParamKind {
		return p.Spec.ParamKind
	})
	// A copy of the object as received, in JSON's types: the dispatcher
	// may write the final object into the one it was given.
	original, err := jsonTree(req.Object.Object)
	if err != nil {
		return nil, fmt.Errorf("%w: copy the object: %w", ErrInternal, err)
	}
	res, err := e.mutator.Dispatch(ctx, attrs, hooks)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("review did not finish in time: %w", err)
	}
	if !res.Allowed {
		resp.Allowed, resp.Result = false, res.Status
		return &Result{Response: resp, FailedPolicies: res.FailedPolicies, Idle: !res.Acted}, nil
	}
	final, ok := res.Object.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%w: mutated object is a %T", ErrInternal, res.Object)
	}
	patched, err := jsonTree(final.Object)
	if err != nil {
		return nil, fmt.Errorf("%w: copy the mutated object: %w", ErrInternal, err)
	}
	// Keys are compared in sorted order, so the same change always gives the
	// same patch; numbers are json.Number, spelled as encoding/json spells
	// them.
	ops, err := jsondiff.CompareWithoutMarshal(original, patched)
	if err != nil {
		return nil, fmt.Errorf("%w: compute the patch: %w", ErrInternal, err)
	}
	if len(ops) > 0 {
		if resp.Patch, err = json.Marshal(ops); err != nil {
			return nil, fmt.Errorf("%w: encode the patch: %w", ErrInternal, err)
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	return &Result{Response: resp, FailedPolicies: res.FailedPolicies, Idle: !res.Acted}, nil
}

// jsonTree copies an unstructured value into the types jsondiff compares
// without marshalling: maps, slices, strings, booleans, nil, and numbers as
// json.Number. Integers (int64 from the decoder, whatever width a patcher
// produced) are spelled in decimal, floats as encoding/json spells them;
// any other type goes through encoding/json.
func jsonTree(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := jsonTree(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := jsonTree(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case string, bool, nil, json.Number:
		return v, nil
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), nil
	case int:
		return json.Number(strconv.Itoa(v)), nil
	case int32:
		return json.Number(strconv.FormatInt(int64(v), 10)), nil
	case float64:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return json.Number(b), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// validationFailureKey is the audit annotation upstream records for a failed
// validation under a binding with the Audit action.
const validationFailureKey = "validation.policy.admission.k8s.io/validation_failure"

// webhookAuditKey maps an upstream audit annotation key to one a webhook may
// return. kube-apiserver records a webhook's annotation as
// "<webhook name>/<key>" and drops it unless that is a qualified name, so the
// key itself may hold no "/" and at most 63 characters:
//   - "validation.policy.admission.k8s.io/validation_failure" → "validation_failure"
//   - "<policy>/<key>" → "<policy>_<key>" (policy names cannot hold "_"),
//     shortened with a digest suffix when longer than 63 characters.
func webhookAuditKey(key string) string {
	if key == validationFailureKey {
		return "validation_failure"
	}
	out := []byte(key)
	for i, c := range out {
		if c == '/' {
			out[i] = '_'
		}
	}
	k := string(out)
	if len(utilvalidation.IsQualifiedName(k)) == 0 {
		return k
	}
	sum := sha256.Sum256([]byte(key))
	if len(k) > 54 {
		k = k[:54]
	}
	return k + "-" + hex.EncodeToString(sum[:4])
}

// compileAll compiles policies independently, on every CPU (CEL
// environments are safe for concurrent use): compiling is most of a cold
// start. Errors name the policy's file and the policy.
func compileAll[P metav1.Object, E any](b *policy.Set, kind string, policies []P, compile func(P) (E, []*celeval.ExpressionError)) (map[string]E, policy.Errors) {
	type compiled struct {
		evaluator E
		errs      []*celeval.ExpressionError
	}
	var errs policy.Errors
	out := make(map[string]E, len(policies))
	for i, r := range parallel.Map(policies, func(p P) compiled {
		e, errs := compile(p)
		return compiled{e, errs}
	}) {
		name := policies[i].GetName()
		for _, fe := range r.errs {
			errs = append(errs, policy.AtOrigin(b.Origin(kind, name), fmt.Errorf("%s: policy %s: %s", b.Origin(kind, name).File, name, fe.Error())))
		}
		out[name] = r.evaluator
	}
	return out, errs
}

// groupHooks makes, in bundle order, a hook of each policy the group binds,
// from copies of the policy and its bindings without namespace selectors
// (see clearNamespaceSelector), read through upstream's accessors of the
// kind.
func groupHooks[P interface{ DeepCopy() P }, B interface{ DeepCopy() B }, H any](
	policies []P, bindings []B,
	policyOf func(P) generic.PolicyAccessor, bindingOf func(B) generic.BindingAccessor,
	hook func(P, []B) H,
) []H {
	var hooks []H
	for _, p := range policies {
		name := policyOf(p).GetName()
		var bound []B
		for _, pb := range bindings {
			if bindingOf(pb).GetPolicyName().Name == name {
				pb = pb.DeepCopy()
				clearNamespaceSelector(bindingOf(pb).GetMatchResources())
				bound = append(bound, pb)
			}
		}
		if len(bound) > 0 {
			p = p.DeepCopy()
			clearNamespaceSelector(policyOf(p).GetMatchConstraints())
			hooks = append(hooks, hook(p, bound))
		}
	}
	return hooks
}

// clearNamespaceSelector empties m's namespace selector. The apiserver
// applies namespace selectors before calling a group's route, so they are
// dropped before matching: the function could not evaluate them.
func clearNamespaceSelector(m *admissionregistrationv1.MatchResources) {
	if m != nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
}

// builtinNamespaced records the scope of built-in kinds commonly used as
// params, which a bundle may name without holding any object of that kind.
var builtinNamespaced = map[schema.GroupVersionKind]bool{
	{Version: "v1", Kind: "ConfigMap"}: true,
	{Version: "v1", Kind: "Secret"}:    true,
	{Version: "v1", Kind: "Namespace"}: false,
}

// paramStores indexes the bundle's params by kind. Without a cluster to ask,
// a kind's scope comes from the built-in table, else from its objects (all
// namespaced or all cluster-scoped), else from bindings that give
// paramRef.namespace; otherwise it is cluster-scoped.
func paramStores(b *policy.Set) (map[schema.GroupVersionKind]*celeval.ParamStore, policy.Errors) {
	byKind := map[schema.GroupVersionKind][]*unstructured.Unstructured{}
	for _, o := range b.Params {
		gvk := o.GroupVersionKind()
		byKind[gvk] = append(byKind[gvk], o)
	}
	var errs policy.Errors
	stores := map[schema.GroupVersionKind]*celeval.ParamStore{}
	refs := b.ParamRefs()
	for _, pk := range b.ParamKinds() {
		gvk := schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)
		if _, done := stores[gvk]; done {
			continue
		}
		objs := byKind[gvk]
		namespaced, known := builtinNamespaced[gvk]
		if !known && len(objs) > 0 {
			withNS := 0
			for _, o := range objs {
				if o.GetNamespace() != "" {
					withNS++
				}
			}
			if withNS != 0 && withNS != len(objs) {
				errs = append(errs, fmt.Errorf("params of kind %s: some have metadata.namespace and some don't; a kind is either namespaced or cluster-scoped", gvk.Kind))
				continue
			}
			namespaced, known = withNS > 0, true
		}
		if !known {
			for _, use := range refs {
				if use.Ref.Namespace != "" && schema.FromAPIVersionAndKind(use.Kind.APIVersion, use.Kind.Kind) == gvk {
					namespaced = true
				}
			}
		}
		stores[gvk] = celeval.NewParamStore(gvk, namespaced, objs)
	}
	return stores, errs
}
