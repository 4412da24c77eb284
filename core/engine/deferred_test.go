package engine

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
)

func deferredEngine(t *testing.T, sources ...policy.Source) *Engine {
	t.Helper()
	return builtWith(t, NewDeferred, sources...)
}

// vap is a ValidatingAdmissionPolicy on resource (apps group for
// deployments, core otherwise) with one binding and one validation.
func vap(name, resource, failurePolicy, expression string) string {
	group := `""`
	if resource == "deployments" {
		group = "apps"
	}
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  failurePolicy: ` + failurePolicy + `
  matchConstraints:
    resourceRules: [{apiGroups: [` + group + `], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [` + resource + `]}]
  validations: [{expression: "` + expression + `"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ` + name + `-binding}
spec: {policyName: ` + name + `, validationActions: [Deny]}
---
`
}

// A deferred engine compiles a policy when a review first needs it: the
// review of a Deployment compiles the Deployment's policy, not the
// ConfigMaps', and answers as New's engine does.
func TestDeferredCompilesWhatAReviewNeeds(t *testing.T) {
	src := policy.Source{Name: "p.yaml", Data: []byte(vap("replicas", "deployments", "Fail", "object.spec.replicas <= 5") + vap("cm", "configmaps", "Fail", "has(object.data)"))}
	e := deferredEngine(t, src)
	if n := e.Uncompiled(); n != 2 {
		t.Fatalf("Uncompiled before any review = %d, want 2", n)
	}
	select {
	case <-e.Reviewed():
		t.Fatal("Reviewed is closed before any review")
	default:
	}
	req := deploymentRequest(t, "CREATE", deployment("nginx", "default", 6, nil))
	check(t, reviewOn(t, e, "replicas-binding", req),
		denied(422, "Invalid", "ValidatingAdmissionPolicy 'replicas' with binding 'replicas-binding' denied request: failed expression: object.spec.replicas <= 5"))
	select {
	case <-e.Reviewed():
	default:
		t.Error("Reviewed is still open after a review")
	}
	select {
	case <-mustEngine(t, src).Reviewed():
	default:
		t.Error("Reviewed of New's engine is open")
	}
	if n := e.Uncompiled(); n != 1 {
		t.Errorf("Uncompiled after a Deployment's review = %d, want 1 (the ConfigMaps' policy)", n)
	}
	if err := e.CompileAll(); err != nil {
		t.Fatal(err)
	}
	if n := e.Uncompiled(); n != 0 {
		t.Errorf("Uncompiled after CompileAll = %d", n)
	}
	if err := mustEngine(t, src).CompileAll(); err != nil || mustEngine(t, src).Uncompiled() != 0 {
		t.Errorf("New's engine: CompileAll %v, Uncompiled %d", err, mustEngine(t, src).Uncompiled())
	}
}

// A policy that does not compile fails by its failurePolicy, as
// kube-apiserver's does when a stored policy no longer compiles: Fail
// denies with upstream's message, Ignore admits; CompileAll reports it as
// New does.
func TestDeferredCompileErrorFollowsFailurePolicy(t *testing.T) {
	e := deferredEngine(t, policy.Source{Name: "broken.yaml", Data: []byte(vap("fail", "deployments", "Fail", "nosuchvar == 1") + vap("ignore", "deployments", "Ignore", "object.spec.replicas +"))})
	req := deploymentRequest(t, "CREATE", deployment("nginx", "default", 1, nil))
	check(t, reviewOn(t, e, "fail-binding", req),
		denied(422, "Invalid", "ValidatingAdmissionPolicy 'fail' with binding 'fail-binding' denied request: compilation error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'nosuchvar' (in container '')\n | nosuchvar == 1\n | ^"))
	check(t, reviewOn(t, e, "ignore-binding", req), want{allowed: true})
	err := e.CompileAll()
	var errs policy.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("CompileAll: %v, want both policies' errors", err)
	}
	if !strings.HasPrefix(errs[0].Error(), "broken.yaml: policy fail: spec.validations[0].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'nosuchvar'") ||
		!strings.HasPrefix(errs[1].Error(), "broken.yaml: policy ignore: spec.validations[0].expression: compilation failed: ERROR: <input>:1:23: Syntax error") {
		t.Errorf("CompileAll errors: %q", errs)
	}
}

// Mutating policies compile on use too; one that does not compile fails
// by its failurePolicy, and its patch is not applied.
func TestDeferredMutatingPolicies(t *testing.T) {
	good := mapPolicy("good", "Fail", applyConfig(`Object{metadata: Object.metadata{labels: {"team": "a"}}}`))
	broken := func(failurePolicy string) string {
		return mapPolicy("broken", failurePolicy, jsonPatchOf(`[JSONPatch{op: "add", path: 1}]`))
	}
	e := deferredEngine(t, policy.Source{Name: "m.yaml", Data: []byte(good + "---\n" + broken("Ignore"))})
	if n := e.Uncompiled(); n != 2 {
		t.Fatalf("Uncompiled = %d, want 2", n)
	}
	expectPatch(t, mustReview(t, e, mutateRoute(t, e, "good"), configMapRequest(t, "CREATE", simpleCM(nil))),
		`[{"op":"add","path":"/metadata/labels","value":{"team":"a"}}]`)

	e = deferredEngine(t, policy.Source{Name: "m.yaml", Data: []byte(good + "---\n" + broken("Fail"))})
	expectDenied(t, mustReview(t, e, mutateRoute(t, e, "broken"), configMapRequest(t, "CREATE", simpleCM(nil))), 403, "Invalid",
		"policy 'broken' with binding 'broken-binding' denied request: compilation failed: ERROR: <input>:1:27: expected type of field 'path' is 'string' but provided type is 'int'\n | [JSONPatch{op: \"add\", path: 1}]\n | ..........................^")
	if n := e.Uncompiled(); n != 0 {
		t.Errorf("Uncompiled = %d after a review both policies match", n)
	}
}

// Reviews racing each other and CompileAll on a fresh deferred engine get
// the answers New's engine gives, and every policy compiles once.
func TestDeferredConcurrentReviews(t *testing.T) {
	names := []string{"01-basic.yaml", "05-audit-annotations.yaml", "06-variables.yaml", "07-match-conditions.yaml"}
	eager := loadExamples(t, names...)
	var sources []policy.Source
	for _, n := range names {
		sources = append(sources, policy.Source{Name: n, Data: []byte(readExample(t, n))})
	}
	e := deferredEngine(t, sources...)
	reqs := []struct {
		binding string
		op      string
		d       map[string]any
	}{
		{"demo-binding-test.example.com", "CREATE", deployment("nginx", "test-ns", 6, nil)},
		{"demo-binding-test.example.com", "UPDATE", deployment("nginx", "test-ns", 3, nil)},
	}
	want := make([]*Result, len(reqs))
	for i, r := range reqs {
		want[i] = reviewOn(t, eager, r.binding, deploymentRequest(t, r.op, r.d))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.CompileAll(); err != nil {
			t.Error(err)
		}
	})
	for range 8 {
		for i, r := range reqs {
			wg.Go(func() {
				got, err := e.Review(t.Context(), groupOf(t, e, r.binding), deploymentRequest(t, r.op, r.d))
				if err != nil || !reflect.DeepEqual(got, want[i]) {
					t.Errorf("review %d: %+v %v, want %+v", i, got, err, want[i])
				}
			})
		}
	}
	wg.Wait()
	if n := e.Uncompiled(); n != 0 {
		t.Errorf("Uncompiled = %d", n)
	}
}
