package engine

import (
	"context"
	"errors"
	goruntime "runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/test/perf"
)

// The evaluation floor of P1 and P2 (docs/performance.md): the CEL the
// Pod's answer needs, and nothing else. Each policy of the 20-policy bundle
// that can match the Pod has its validator called directly, once per
// binding: its validations, then every message expression, then its audit
// annotations, with kube-apiserver's compiled programs, cost limits and
// budget, each variable evaluated once per policy and the objects' CEL
// values shared, as admitfn evaluates them; no dispatcher, no matching, no
// params lookup, no answer. An evaluator that keeps upstream's programs and
// budgets, as admitfn must, evaluates at least this much.
//
// P8 pushed that floor down: expressions a bound proves within their cost
// limits and budget are evaluated without cost tracking
// (celeval/internal/cost). The floor compiled with celeval.ExactCost is
// today's floor before P8, which every expression tracked.

// floorPolicy is one policy's validator and, for each of its bindings, the
// params it reads.
type floorPolicy struct {
	validator validating.Validator
	params    []runtime.Object
}

// evaluationFloor is what the floor evaluates of e on req: its candidate
// policies on the validating route, with their params looked up once.
func evaluationFloor(tb testing.TB, e *Engine, req *review.Request) []floorPolicy {
	tb.Helper()
	var out []floorPolicy
	for _, h := range e.routes[validateRoute].validating.candidates(celeval.NewAttributes(req)) {
		fp := floorPolicy{validator: h.Evaluator}
		for _, b := range h.Bindings {
			var params runtime.Object
			if ref := b.Spec.ParamRef; ref != nil {
				obj, err := h.ParamInformer.Lister().ByNamespace(ref.Namespace).Get(ref.Name)
				if err != nil {
					tb.Fatalf("%s: params: %v", b.Name, err)
				}
				params = obj
			}
			fp.params = append(fp.params, params)
		}
		out = append(out, fp)
	}
	return out
}

// floorReview evaluates every policy once per binding on req, sharing their
// inputs as a validating review does, and counts what they decided.
func floorReview(ctx context.Context, req *review.Request, policies []floorPolicy) (evaluations, denials, annotations int) {
	attrs := celeval.NewAttributes(req).Validating()
	// What upstream's dispatcher hands a validator: the attributes in the
	// kind matched (no conversion: it is the request's own) and the
	// namespace as the function knows it.
	va, err := admission.NewVersionedAttributes(attrs, attrs.GetKind(), objectInterfaces)
	if err != nil {
		panic(err) // same kind: never converts
	}
	ns, err := celeval.NamespaceLister().Get(attrs.GetNamespace())
	if err != nil {
		panic(err) // known by name: never fails
	}
	for _, p := range policies {
		for _, params := range p.params {
			res := p.validator.Validate(ctx, attrs.GetResource(), va, params, ns, celconfig.RuntimeCELCostBudget, nil)
			evaluations++
			for _, d := range res.Decisions {
				if d.Action != validating.ActionAdmit || d.Evaluation != validating.EvalAdmit {
					denials++
				}
			}
			annotations += len(res.AuditAnnotations)
		}
	}
	return evaluations, denials, annotations
}

// objectInterfaces are the dispatcher's own: an empty scheme, since objects
// arrive in the version matched.
var objectInterfaces = admission.NewObjectInterfacesFromScheme(runtime.NewScheme())

// The floor evaluates what a review of the Pod does: the 17 policies that
// match it (TestPerfFixtures), allowing it with one audit annotation; and a
// privileged container breaks the baseline profile's control (the
// restricted policy holds only the controls it adds).
//
// With exact cost tracking (P8's baseline) it evaluates the same; with
// bounds, from the second review on, the condition sets go untracked.
func TestEvaluationFloor(t *testing.T) {
	for _, exact := range []bool{false, true} {
		var opts []celeval.Option
		if exact {
			opts = append(opts, celeval.ExactCost())
		}
		e := bundle20(t, opts...)
		policies := evaluationFloor(t, e, benchPod(t))
		for range 2 {
			evaluations, denials, annotations := floorReview(context.Background(), benchPod(t), policies)
			if len(policies) != 17 || evaluations != 17 || denials != 0 || annotations != 1 {
				t.Fatalf("exact cost %v: %d policies evaluated %d times: %d denials, %d audit annotations; want 17, 17, 0, 1", exact, len(policies), evaluations, denials, annotations)
			}
			priv := benchPod(t)
			containers := priv.Object.Object["spec"].(map[string]any)["containers"].([]any)
			containers[0].(map[string]any)["securityContext"].(map[string]any)["privileged"] = true
			if _, denials, _ := floorReview(context.Background(), priv, policies); denials != 1 {
				t.Fatalf("exact cost %v: a privileged container: %d denials, want 1", exact, denials)
			}
		}
	}
}

// BenchmarkFloors: P2's floor beside P2 itself, and P8. Its parts run in
// turn, in blocks of floorBlock reviews each, so that the machine's drift
// between benchmarks does not enter the ratios: the evaluation floor, the
// same floor with every cost tracked (P8's baseline), admitfn's evaluation
// (P2) and upstream's (P2's baseline), each on reviews decoded just before
// it. Each block starts after a full collection and allocates less than
// starts another, so the loop compares the work itself, without the
// collector (which would charge one part for another's garbage). The
// engines are warmed first (see warm). Read p2-floor,
// evaluation floor ÷ upstream's evaluation, beside what admitfn reads in the
// same loop (p2-admitfn), and p8, the evaluation floor ÷ the floor with
// exact cost. P1's floor is measured in BenchmarkP1Review, as P1 is,
// collector included.
func BenchmarkFloors(b *testing.B) {
	e := warm(b, bundle20(b))
	body := perf.PodReview()
	policies := evaluationFloor(b, e, benchPod(b))
	exactPolicies := evaluationFloor(b, warm(b, bundle20(b, celeval.ExactCost())), benchPod(b))
	hooks := upstreamHooks(b, e)
	ctx := context.Background()
	reqs := make([]*review.Request, floorBlock)
	// block runs part on each of the block's reviews in turn, after a full
	// collection, and times them all.
	block := func(part func(i int) error) time.Duration {
		goruntime.GC()
		start := time.Now()
		for i := range reqs {
			if err := part(i); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	// decode decodes the block's reviews afresh: each evaluating part reads
	// objects just decoded, as a review does, and none reads objects the
	// part before it has brought into the caches.
	decode := func() {
		block(func(i int) (err error) { reqs[i], err = review.Decode(body); return err })
	}
	var evaluation, exact, admitfn, upstream time.Duration
	for b.Loop() {
		decode()
		evaluation += block(floorPart(ctx, reqs, policies))
		decode()
		exact += block(floorPart(ctx, reqs, exactPolicies))
		decode()
		admitfn += block(func(i int) error { _, err := e.Review(ctx, validateRoute, reqs[i]); return err })
		decode()
		upstream += block(func(i int) error {
			_, err := e.dispatcher.Dispatch(ctx, celeval.NewAttributes(reqs[i]), hooks)
			return err
		})
	}
	n := float64(b.N * floorBlock)
	b.ReportMetric(float64(evaluation.Microseconds())/n, "floor-µs")
	b.ReportMetric(float64(admitfn.Microseconds())/n, "admitfn-µs")
	b.ReportMetric(float64(upstream.Microseconds())/n, "upstream-µs")
	b.ReportMetric(float64(evaluation)/float64(upstream), "p2-floor")
	b.ReportMetric(float64(exact.Microseconds())/n, "exact-floor-µs")
	b.ReportMetric(float64(evaluation)/float64(exact), "p8")
	b.ReportMetric(float64(admitfn)/float64(upstream), "p2-admitfn")
}

// floorPart evaluates the floor's policies on the i-th of reqs, which they
// must allow.
func floorPart(ctx context.Context, reqs []*review.Request, policies []floorPolicy) func(i int) error {
	return func(i int) error {
		if _, denials, _ := floorReview(ctx, reqs[i], policies); denials != 0 {
			return errors.New("the Pod was denied")
		}
		return nil
	}
}

// floorBlock is how many reviews each part of BenchmarkFloors runs in turn.
const floorBlock = 25
