package validate

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	listersv1 "k8s.io/client-go/listers/core/v1"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/internal/outcome"
)

// Hook is one policy with the bindings that apply on a route, its compiled
// validator and its params: upstream's generic.PolicyHook.
type Hook = validating.PolicyHook

// NewHook assembles a hook. params may be nil when the policy has no
// paramKind. The policy is wrapped so the review's Trace learns which
// policies failed.
func NewHook(p *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, v validating.Validator, params *celeval.ParamStore) Hook {
	h := Hook{Policy: p, Bindings: bindings, Evaluator: tracingValidator{Validator: v, policy: p.Name, failurePolicy: p.Spec.FailurePolicy, readsNamespace: readsNamespace(p)}}
	if params != nil {
		h.ParamInformer = params
		h.ParamScope = params.Scope()
	}
	return h
}

// Dispatcher evaluates hooks with upstream's VAP dispatcher.
type Dispatcher struct {
	upstream generic.Dispatcher[validating.PolicyHook]
	objects  admission.ObjectInterfaces
}

// NewDispatcher builds a dispatcher. No authorizer is given: the function
// has none, and admitfn's activation never exposes one to CEL. Namespaces
// are what the function knows of them: their names.
func NewDispatcher() *Dispatcher { return NewDispatcherWith(celeval.NamespaceLister()) }

// NewDispatcherWith builds a dispatcher that reads namespaces (namespaceObject,
// namespace selectors) from namespaces: an audit's, which knows them whole.
func NewDispatcherWith(namespaces listersv1.NamespaceLister) *Dispatcher {
	m := bindingNoter{generic.NewPolicyMatcher(matching.NewMatcher(namespaces, nil))}
	return &Dispatcher{
		upstream: validating.NewDispatcher(nil, m),
		// An empty scheme: objects arrive already in the version the webhook
		// asked for, so no conversion is ever needed.
		objects: admission.NewObjectInterfacesFromScheme(runtime.NewScheme()),
	}
}

// Result is the outcome of one review.
type Result struct {
	Allowed bool
	// Status is set when the request is denied: message, reason and code
	// exactly as kube-apiserver's ValidatingAdmissionPolicy returns them.
	Status *metav1.Status
	// Warnings in the order they were raised.
	Warnings []string
	// AuditAnnotations as upstream publishes them ("<policy>/<key>" and
	// "validation.policy.admission.k8s.io/validation_failure"), in order.
	AuditAnnotationKeys []string
	AuditAnnotations    map[string]string
	// FailedPolicies names the policies with at least one failed validation
	// or error, for logs.
	FailedPolicies []string
	// Acted: a binding acted on the review (outcome.Trace.Acted), or it was denied
	// (a binding's configuration error denies without evaluating).
	Acted bool
}

// ErrInternal marks a failure of the evaluation machinery itself (not a
// policy decision): the caller must answer with an error, so the webhook's
// failurePolicy decides.
var ErrInternal = outcome.ErrInternal

// Dispatch evaluates hooks against attrs.
func (d *Dispatcher) Dispatch(ctx context.Context, attrs *celeval.Attributes, hooks []Hook) (Result, error) {
	rec := &warnings{}
	ctx, tr := outcome.WithTrace(warning.WithWarningRecorder(ctx, rec))
	attrs.Validating()

	err := d.upstream.Dispatch(ctx, attrs, d.objects, hooks)
	res := Result{Allowed: err == nil, Warnings: rec.list, FailedPolicies: tr.Failed(), Acted: tr.Acted() || err != nil}
	res.AuditAnnotationKeys, res.AuditAnnotations = attrs.Annotations()
	if err == nil {
		return res, nil
	}
	var se *k8serrors.StatusError
	if !errors.As(err, &se) {
		return Result{}, fmt.Errorf("%w: %w", ErrInternal, err)
	}
	st := se.ErrStatus
	// The dispatcher records the policy's own message as the last cause;
	// the top-level message adds `<resource> "<name>" is forbidden: `, which
	// kube-apiserver adds again itself for a webhook denial.
	message := st.Message
	if st.Details != nil && len(st.Details.Causes) > 0 {
		message = st.Details.Causes[len(st.Details.Causes)-1].Message
	}
	res.Status = &metav1.Status{
		Status:  metav1.StatusFailure,
		Message: message,
		Reason:  st.Reason,
		Code:    st.Code,
		Details: st.Details,
	}
	return res, nil
}

// warnings is the request's warning.Recorder. kube-apiserver de-duplicates
// and truncates webhook warnings itself; exact repeats are dropped here too.
type warnings struct{ list []string }

func (w *warnings) AddWarning(_, text string) {
	for _, existing := range w.list {
		if existing == text {
			return
		}
	}
	w.list = append(w.list, text)
}

// tracingValidator notes which policies produced a failed validation or an
// error, so a review's log line can name them without logging messages
// (which may quote object contents), and gives a Report each decision.
//
// It also gives the policy what it reads of the review's cluster, when the
// function reads it: the review's authorizer (never the dispatcher's, which
// has none), and the whole namespace to a policy that reads
// namespaceObject. A namespace that cannot be read fails the policy, and
// its failurePolicy decides, as for any error of its own.
type tracingValidator struct {
	validating.Validator
	policy         string
	failurePolicy  *admissionregistrationv1.FailurePolicyType
	readsNamespace bool
}

func (v tracingValidator) Validate(ctx context.Context, matchedResource schema.GroupVersionResource, versionedAttr *admission.VersionedAttributes, versionedParams runtime.Object, namespace *corev1.Namespace, runtimeCELCostBudget int64, _ authorizer.UnconditionalAuthorizer) validating.ValidateResult {
	var res validating.ValidateResult
	var err error
	if v.readsNamespace {
		namespace, err = celeval.ReviewNamespace(ctx, versionedAttr, namespace)
	}
	if err != nil {
		action := validating.ActionDeny
		if v.failurePolicy != nil && *v.failurePolicy == admissionregistrationv1.Ignore {
			action = validating.ActionAdmit
		}
		res = validating.ValidateResult{Decisions: []validating.PolicyDecision{{Action: action, Evaluation: validating.EvalError, Message: err.Error()}}}
	} else {
		res = v.Validator.Validate(ctx, matchedResource, versionedAttr, versionedParams, namespace, runtimeCELCostBudget, celeval.ReviewAuthorizer(versionedAttr))
	}
	if len(res.Decisions) > 0 || len(res.AuditAnnotations) > 0 {
		// Upstream's validator answers nothing when the match conditions
		// leave the request out.
		outcome.Acted(ctx)
	}
	if r, ok := ctx.Value(reportKey{}).(*Report); ok {
		binding := ""
		if a, ok := versionedAttr.Attributes.(*celeval.Attributes); ok {
			binding = a.Binding()
		}
		r.add(v.policy, binding, res.Decisions)
	}
	for _, d := range res.Decisions {
		if d.Action == validating.ActionDeny || d.Evaluation == validating.EvalError {
			outcome.Failure(ctx, v.policy)
			break
		}
	}
	for _, a := range res.AuditAnnotations {
		if a.Action == validating.AuditAnnotationActionError {
			outcome.Failure(ctx, v.policy)
			break
		}
	}
	return res
}

// bindingNoter tells the review's Attributes which binding upstream's
// dispatcher matched, so that the evaluation that follows is reported
// under it.
type bindingNoter struct{ generic.PolicyMatcher }

func (m bindingNoter) BindingMatches(a admission.Attributes, o admission.ObjectInterfaces, b generic.BindingAccessor) (bool, error) {
	ok, err := m.PolicyMatcher.BindingMatches(a, o, b)
	if ok && err == nil {
		if ca, is := a.(*celeval.Attributes); is {
			ca.SetBinding(b.GetName())
		}
	}
	return ok, err
}

type reportKey struct{}

// Report collects every validation decision of a review, for audits
// (admitfn apply): which policy, under which binding, which validation,
// and what it decided. Reviews that do not ask for one pay nothing.
type Report struct{ Evaluations []Evaluation }

// Evaluation is one validation of a policy, evaluated under a binding.
type Evaluation struct {
	Policy, Binding string
	// Index is the validation's index in spec.validations.
	Index int
	// Evaluation is admit, deny or error; Action what the failure policy
	// made of an error (admit when Ignore).
	Evaluation validating.PolicyDecisionEvaluation
	Action     validating.PolicyDecisionAction
	Message    string
}

// WithReport returns ctx asking reviews to record their decisions into the
// returned Report. A Report is for one review at a time.
func WithReport(ctx context.Context) (context.Context, *Report) {
	r := &Report{}
	return context.WithValue(ctx, reportKey{}, r), r
}

func (r *Report) add(policy, binding string, decisions []validating.PolicyDecision) {
	for i, d := range decisions {
		r.Evaluations = append(r.Evaluations, Evaluation{Policy: policy, Binding: binding, Index: i, Evaluation: d.Evaluation, Action: d.Action, Message: d.Message})
	}
}

// readsNamespace reports whether an expression of p that is given the
// namespace may read namespaceObject (upstream's match conditions are not
// given it). A mention in a string literal counts too: it costs a read, never
// a wrong answer.
func readsNamespace(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
	var exprs []string
	for _, v := range p.Spec.Variables {
		exprs = append(exprs, v.Expression)
	}
	for _, v := range p.Spec.Validations {
		exprs = append(exprs, v.Expression, v.MessageExpression)
	}
	for _, a := range p.Spec.AuditAnnotations {
		exprs = append(exprs, a.ValueExpression)
	}
	return celeval.MentionsNamespaceObject(exprs...)
}
