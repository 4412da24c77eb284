package engine

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/validate"
	"github.com/admitfn/admitfn/core/validate/validatetest"
	"github.com/admitfn/admitfn/test/perf"
)

// The P1–P3 measures of docs/performance.md. P1 and P3 run their subject
// and baseline in turn and report the ratio; P2's are sub-benchmarks,
// whose times hack/benchsum divides.

var validateRoute = policy.Route{Type: policy.Validating}

func perfEngine(tb testing.TB, fsys fs.FS, opts ...celeval.Option) *Engine {
	tb.Helper()
	e, _, err := Load(fsys, ".", celeval.NewCompiler(opts...))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// warm reviews the Pod with e a few times before a benchmark times it: a
// condition set plans its untracked programs at its second evaluation and
// computes a bound once per size class, one-off work that a benchmark's
// first iterations would otherwise charge to whatever part first uses e.
func warm(tb testing.TB, e *Engine) *Engine {
	tb.Helper()
	for range 3 {
		if _, err := e.Review(context.Background(), validateRoute, benchPod(tb)); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

func bundle20(tb testing.TB, opts ...celeval.Option) *Engine {
	tb.Helper()
	fsys, err := perf.Bundle20(perf.RepoRoot())
	if err != nil {
		tb.Fatal(err)
	}
	return perfEngine(tb, fsys, opts...)
}

func benchPod(tb testing.TB) *review.Request {
	tb.Helper()
	req, err := review.Decode(perf.PodReview())
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// reviewBytes is the whole of a review as a function does it: bytes in,
// bytes out.
func reviewBytes(ctx context.Context, e *Engine, body []byte) ([]byte, error) {
	req, err := review.Decode(body)
	if err != nil {
		return nil, err
	}
	res, err := e.Review(ctx, validateRoute, req)
	if err != nil {
		return nil, err
	}
	return review.Encode(req.APIVersion, res.Response)
}

// The fixtures are what the benchmarks claim: 20 policies, 17 of them
// evaluated on the Pod, which they allow with one audit annotation; the
// generated bundle's matching policies are the ones evaluated.
func TestPerfFixtures(t *testing.T) {
	e := bundle20(t)
	if n := len(e.Policies().Policies); n != 20 {
		t.Fatalf("bundle has %d policies, want 20", n)
	}
	req := benchPod(t)
	res, err := e.Review(context.Background(), validateRoute, req)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's key is "<policy>/<key>"; an answer's keys cannot hold a
	// slash, and kube-apiserver prefixes them with the webhook's name.
	const value = "api=IfNotPresent,cache=IfNotPresent,migrate=IfNotPresent"
	want := map[string]string{"pull-policy-audit.bench.admitfn.io_pull-policies": value}
	if !res.Response.Allowed || res.Response.Result != nil || len(res.Response.Warnings) != 0 || !equalMaps(res.Response.AuditAnnotations, want) {
		t.Fatalf("answer %+v, want allowed with audit annotations %v", res.Response, want)
	}
	if n := len(e.routes[validateRoute].validating.hooks); n != 20 {
		t.Fatalf("%d hooks, want 20", n)
	}
	upstream := upstreamHooks(t, e)
	out, err := e.dispatcher.Dispatch(context.Background(), celeval.NewAttributes(req), upstream)
	if err != nil || !out.Allowed || !equalMaps(out.AuditAnnotations, map[string]string{"pull-policy-audit.bench.admitfn.io/pull-policies": value}) {
		t.Fatalf("upstream evaluation: %+v %v", out, err)
	}

	wide := perfEngine(t, perf.Generated(1000, 10))
	if res, err := wide.Review(context.Background(), validateRoute, req); err != nil || !res.Response.Allowed {
		t.Fatalf("generated bundle: %+v %v", res, err)
	}
	// A Pod of 30 containers breaks exactly the ten matching policies.
	crowded := benchPod(t)
	containers := crowded.Object.Object["spec"].(map[string]any)["containers"].([]any)
	for len(containers) < 30 {
		containers = append(containers, containers[0])
	}
	crowded.Object.Object["spec"].(map[string]any)["containers"] = containers
	res, err = wide.Review(context.Background(), validateRoute, crowded)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.FailedPolicies) != 10 || res.FailedPolicies[0] != "generated-0000.bench.admitfn.io" || res.FailedPolicies[9] != "generated-0009.bench.admitfn.io" {
		t.Fatalf("failed policies %v, want generated-0000 … generated-0009", res.FailedPolicies)
	}
	if msg := res.Response.Result.Message; msg != "ValidatingAdmissionPolicy 'generated-0000.bench.admitfn.io' with binding 'generated-0000' denied request: at most 8 containers, found 30" {
		t.Fatalf("message %q", msg)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// floor is the least a review can do, written plainly and independent of
// admitfn's codec so that a faster codec shows in P1: decode the
// AdmissionReview (typed, and its object as unstructured, as kube-apiserver's
// CEL sees it) and encode an answer with encoding/json.
func floor(body []byte) ([]byte, error) {
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	var object map[string]any
	if err := utiljson.Unmarshal(in.Request.Object.Raw, &object); err != nil {
		return nil, err
	}
	out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}}
	return json.Marshal(out)
}

// BenchmarkP1Review: a whole review of the ~8 KB Pod against the 20-policy
// bundle, bytes in → bytes out (admitfn) ÷ decoding that AdmissionReview and
// encoding an answer with the same codec (floor), reported as x-floor. P1's
// own floor is measured the same way, evaluation-x-floor: decoding the Pod
// with admitfn's decoder and the evaluation floor (BenchmarkFloors),
// encoding the answer left out. The three run in turn, with the collector
// running as it does for any review, so that a drift of the machine's
// speed during the run moves all three alike.
func BenchmarkP1Review(b *testing.B) {
	e := warm(b, bundle20(b))
	body := perf.PodReview()
	ctx := context.Background()
	policies := evaluationFloor(b, e, benchPod(b))
	reqs := make([]*review.Request, 1)
	parts := []func() error{
		func() error { _, err := reviewBytes(ctx, e, body); return err },
		func() error { _, err := floor(body); return err },
		func() (err error) {
			if reqs[0], err = review.Decode(body); err != nil {
				return err
			}
			return floorPart(ctx, reqs, policies)(0)
		},
	}
	b.ReportAllocs()
	took := inTurn(b, parts...)
	n := float64(b.N)
	for i, name := range []string{"admitfn", "floor", "evaluation-floor"} {
		b.ReportMetric(float64(took[i].Nanoseconds())/1000/n, name+"-µs")
	}
	b.ReportMetric(float64(took[0])/float64(took[1]), "x-floor")
	b.ReportMetric(float64(took[2])/float64(took[1]), "evaluation-x-floor")
}

// inTurn runs one of each part in turn for every iteration of b, so that a
// drift of the machine's speed during the run moves them all alike, and
// returns the time each took in all.
func inTurn(b *testing.B, parts ...func() error) []time.Duration {
	took := make([]time.Duration, len(parts))
	for b.Loop() {
		for i, part := range parts {
			began := time.Now()
			err := part()
			took[i] += time.Since(began)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	return took
}

// BenchmarkP2Evaluate: admitfn's evaluation of the decoded Pod against the
// 20-policy bundle ÷ kube-apiserver's own: the same dispatcher and hooks,
// each policy compiled by upstream's compilePolicy, whose evaluator converts
// the request for CEL on every call.
func BenchmarkP2Evaluate(b *testing.B) {
	againstUpstream(b, warm(b, bundle20(b)))
}

// BenchmarkOneExpressionPolicies is P2 with small policies
// (perf.Generated: 20 policies matching the Pod, two short validations
// each), where building CEL's inputs is a larger part of upstream's work.
func BenchmarkOneExpressionPolicies(b *testing.B) {
	againstUpstream(b, warm(b, perfEngine(b, perf.Generated(20, 20))))
}

// againstUpstream runs e's evaluation of the Pod (admitfn), then the same
// hooks compiled as kube-apiserver compiles them (upstream).
func againstUpstream(b *testing.B, e *Engine) {
	req := benchPod(b)
	ctx := context.Background()
	b.Run("admitfn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Review(ctx, validateRoute, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	hooks := upstreamHooks(b, e)
	b.Run("upstream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.dispatcher.Dispatch(ctx, celeval.NewAttributes(req), hooks); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkP3Index: a review against 1,000 policies of which 10 match the
// Pod ÷ against those 10 alone, reported as x-10-policies. Rounds
// alternate the two bundles, so that a drift of the machine's speed moves
// both alike; each round builds its engine and drops it after, so that
// only one engine's heap is live while it is timed (the collector's work
// on 1,000 compiled policies is part of what P3 measures).
func BenchmarkP3Index(b *testing.B) {
	req := benchPod(b)
	ctx := context.Background()
	names := []string{"1000-policies", "10-policies"}
	bundles := []fs.FS{perf.Generated(1000, 10), perf.Generated(10, 10)}
	rounds := min(4, b.N)
	took := make([]time.Duration, len(bundles))
	b.ReportAllocs()
	for r := range rounds {
		n := b.N / rounds
		if r < b.N%rounds {
			n++
		}
		for i, fsys := range bundles {
			b.StopTimer()
			e := warm(b, perfEngine(b, fsys))
			runtime.GC()
			b.StartTimer()
			began := time.Now()
			for range n {
				if _, err := e.Review(ctx, validateRoute, req); err != nil {
					b.Fatal(err)
				}
			}
			took[i] += time.Since(began)
		}
	}
	for i, name := range names {
		b.ReportMetric(float64(took[i].Nanoseconds())/1000/float64(b.N), name+"-µs")
	}
	b.ReportMetric(float64(took[0])/float64(took[1]), "x-10-policies")
}

// upstreamHooks are e's validating hooks with each policy compiled as
// kube-apiserver's plugin compiles it.
func upstreamHooks(tb testing.TB, e *Engine) []validate.Hook {
	tb.Helper()
	c := celeval.NewCompiler()
	var hooks []validate.Hook
	for _, h := range e.routes[validateRoute].validating.hooks {
		h.Evaluator = validatetest.CompileUpstream(c, h.Policy)
		hooks = append(hooks, h)
	}
	return hooks
}

// BenchmarkLoad100 compiles the 100-policy bundle of P4 and P6 (the 20
// policies and 80 generated ones that never match the Pod): the largest part
// of a cold start.
func BenchmarkLoad100(b *testing.B) {
	b20, err := perf.Bundle20(perf.RepoRoot())
	if err != nil {
		b.Fatal(err)
	}
	benchLoad(b, perf.Merge(b20, perf.Generated(80, 0)))
}

// BenchmarkLoadExamples compiles the example bundle, whose mutating
// policies compile in environments of their own.
func BenchmarkLoadExamples(b *testing.B) {
	benchLoad(b, os.DirFS(filepath.Join(perf.RepoRoot(), "policies", "examples")))
}

func benchLoad(b *testing.B, fsys fs.FS) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Load(fsys, ".", celeval.NewCompiler()); err != nil {
			b.Fatal(err)
		}
	}
}
