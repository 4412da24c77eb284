package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/test/perf"
)

// linearExpr walks every container once: its evaluation should take time in
// proportion to the containers. cel-go's runtime cost tracker makes it grow
// with their square (docs/performance.md, "Evaluation time and object
// size").
const linearExpr = "object.spec.containers.all(c, c.image != 'zzz')"

func wideReview(tb testing.TB, containers int) *review.Request {
	tb.Helper()
	cs := make([]map[string]any, containers)
	for i := range cs {
		cs[i] = map[string]any{"name": fmt.Sprintf("c%d", i), "image": "nginx"}
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": map[string]any{
		"uid": "u", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"}, "resource": map[string]any{"group": "", "version": "v1", "resource": "pods"},
		"namespace": "default", "name": "wide", "operation": "CREATE", "userInfo": map[string]any{"username": "alice"},
		"object": map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "wide", "namespace": "default"}, "spec": map[string]any{"containers": cs}},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	req, err := review.Decode(body)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

func linearEngine(tb testing.TB) *Engine {
	tb.Helper()
	src := policy.Source{Name: "linear.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: linear}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "` + linearExpr + `"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: linear}
spec: {policyName: linear, validationActions: [Deny]}
`)}
	return engineOf(tb, compiler, src)
}

// engineOf is the engine of srcs compiled by c.
func engineOf(tb testing.TB, c *celeval.Compiler, srcs ...policy.Source) *Engine {
	tb.Helper()
	b, err := policy.Parse(srcs)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := New(b, c)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// BenchmarkL1Linear reviews Pods of 10,000 and 40,000 containers; make bench
// reports the ratio of their times (L1, target at most 5: linear time).
func BenchmarkL1Linear(b *testing.B) {
	benchWide(b, linearEngine(b), true)
}

// benchWide reviews Pods of 10,000 and 40,000 containers with e, in turn,
// each answered allowed as said: a drift of the machine's speed during the
// run moves both alike. It reports each one's time and their ratio, x-10k.
func benchWide(b *testing.B, e *Engine, allowed bool) {
	sizes := []int{10000, 40000}
	parts := make([]func() error, len(sizes))
	for i, n := range sizes {
		req := wideReview(b, n)
		parts[i] = func() error {
			res, err := e.Review(context.Background(), policy.Route{Type: policy.Validating}, req)
			if err == nil && res.Response.Allowed != allowed {
				err = fmt.Errorf("%d containers: %+v", n, res)
			}
			return err
		}
	}
	took := inTurn(b, parts...)
	for i, n := range sizes {
		b.ReportMetric(float64(took[i].Microseconds())/1000/float64(b.N), fmt.Sprintf("%dk-ms", n/1000))
	}
	b.ReportMetric(float64(took[1])/float64(took[0]), "x-10k")
}

// podSecurityEngine serves the policy library's Pod Security profiles,
// bound to every namespace.
func podSecurityEngine(tb testing.TB, opts ...celeval.Option) *Engine {
	tb.Helper()
	root := perf.RepoRoot()
	var srcs []policy.Source
	for _, f := range []string{"policies/library/pod-security/policy-baseline.yaml", "policies/library/pod-security/policy-restricted.yaml", "test/perf/testdata/pod-security-bindings.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			tb.Fatal(err)
		}
		srcs = append(srcs, policy.Source{Name: f, Data: data})
	}
	return engineOf(tb, celeval.NewCompiler(opts...), srcs...)
}

// On Pods with more containers than the linear tracker's threshold, the
// Pod Security profiles' tracked evaluations are tracked linearly: the
// answers are the ones cel-go's tracker gives (ExactCost), message for
// message, first review and second (when the bounds apply).
func TestPodSecurityOnWidePods(t *testing.T) {
	exact, linear := podSecurityEngine(t, celeval.ExactCost()), podSecurityEngine(t)
	for _, n := range []int{celeval.DefaultLinearTrackingFrom + 100} {
		req := wideReview(t, n)
		privileged := wideReview(t, n)
		cs := privileged.Object.Object["spec"].(map[string]any)["containers"].([]any)
		cs[n/2].(map[string]any)["securityContext"] = map[string]any{"privileged": true}
		for _, r := range []*review.Request{req, privileged, req} {
			want, err := exact.Review(context.Background(), policy.Route{Type: policy.Validating}, r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := linear.Review(context.Background(), policy.Route{Type: policy.Validating}, r)
			if err != nil {
				t.Fatal(err)
			}
			if want.Response.Allowed || want.Response.Result == nil {
				t.Fatalf("%d containers: the restricted profile allowed %+v", n, want.Response)
			}
			if !reflect.DeepEqual(got.Response, want.Response) || !slices.Equal(got.FailedPolicies, want.FailedPolicies) {
				t.Errorf("%d containers: answer %+v (%v)\nwith cel-go's tracker %+v (%v)", n, got.Response, got.FailedPolicies, want.Response, want.FailedPolicies)
			}
		}
	}
}

// BenchmarkL2PodSecurity reviews Pods of 10,000 and 40,000 containers
// against the Pod Security profiles, whose comprehensions over containers
// and their lists are tracked; make bench reports the ratio of their times
// (L2, target at most 5: linear time).
func BenchmarkL2PodSecurity(b *testing.B) {
	benchWide(b, podSecurityEngine(b), false)
}

// A mutating review's tracked evaluations (match conditions, mutations) are
// tracked linearly past the threshold too: the same patch as with cel-go's
// tracker.
func TestMutationOnWidePods(t *testing.T) {
	src := policy.Source{Name: "count.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: count-images}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions:
  - {name: named, expression: "object.spec.containers.all(c, c.name != '')"}
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {"nginx": string(object.spec.containers.filter(c, c.image == 'nginx').size())}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: count-images}
spec: {policyName: count-images}
`)}
	engines := []*Engine{engineOf(t, celeval.NewCompiler(celeval.ExactCost()), src), engineOf(t, celeval.NewCompiler(), src)}
	rt := mutateRoute(t, engines[0], "count-images")
	for _, n := range []int{celeval.DefaultLinearTrackingFrom + 100, 3000} {
		want := fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{"nginx":"%d"}}]`, n)
		for _, e := range engines {
			resp := mustReview(t, e, rt, wideReview(t, n))
			if !resp.Allowed || !jsonEqual(t, resp.Patch, []byte(want)) {
				t.Errorf("%d containers: allowed %v, patch %s; want %s", n, resp.Allowed, resp.Patch, want)
			}
		}
	}
}
