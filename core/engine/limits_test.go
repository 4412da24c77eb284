package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/core/policy"
)

// What bounds a review: kube-apiserver's CEL cost limits (the same as
// in-process; e2e checks the per-call limit, a binding's runtime budget and
// the messageExpression size limit against kube-apiserver itself), and the
// review's deadline, which in-process evaluation does not have.

// wideConfigMap is a ConfigMap with n data keys: comprehensions over its data
// cost n per level.
func wideConfigMap(name string, n int) map[string]any {
	data := map[string]any{}
	for i := range n {
		data[fmt.Sprintf("k%03d", i)] = "v"
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"}, "data": data}
}

// runawayExpr holds for a narrow ConfigMap; left to run to its end on a wide
// one, it is false, so a wide ConfigMap is allowed under failurePolicy
// Ignore only when something stopped the expression.
const runawayExpr = "object.data.all(a, object.data.all(b, object.data.all(c, a + b + c != ''))) && object.data.size() < 100"

// configMapPolicies is n policies, each with a Deny binding, over ConfigMap
// creates, each with the given validations and failurePolicy.
func configMapPolicies(n int, failurePolicy string, validations ...string) policy.Source {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: runaway-%[1]d}
spec:
  failurePolicy: %[2]s
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}
  validations:
`, i, failurePolicy)
		for _, v := range validations {
			fmt.Fprintf(&b, "  - expression: %q\n", v)
		}
		fmt.Fprintf(&b, `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: runaway-%[1]d}
spec: {policyName: runaway-%[1]d, validationActions: [Deny]}
`, i)
	}
	return policy.Source{Name: "runaway.yaml", Data: []byte(b.String())}
}

func TestRunawayExpressionStopsAtTheCostLimit(t *testing.T) {
	// 150³ iterations: far over the per-expression limit (1,000,000). The
	// review has no deadline: what stops the expression is the cost limit,
	// whose error the answer carries (Fail) or ignores (Ignore, allowed where
	// the finished expression would deny).
	for _, tc := range []struct {
		failurePolicy string
		want          want
	}{
		{"Fail", denied(422, "Invalid", "ValidatingAdmissionPolicy 'runaway-0' with binding 'runaway-0' denied request: expression '"+runawayExpr+"' resulted in error: operation cancelled: actual cost limit exceeded")},
		{"Ignore", want{allowed: true}},
	} {
		t.Run(tc.failurePolicy, func(t *testing.T) {
			e := mustEngine(t, configMapPolicies(1, tc.failurePolicy, runawayExpr))
			res, err := e.Review(context.Background(), groupOf(t, e, "runaway-0"), configMapRequest(t, "CREATE", wideConfigMap("wide", 150)))
			if err != nil {
				t.Fatal(err)
			}
			check(t, res, tc.want)
		})
	}
	// A small object stays under the limit and is decided normally.
	e := mustEngine(t, configMapPolicies(1, "Fail", runawayExpr))
	res, err := e.Review(context.Background(), groupOf(t, e, "runaway-0"), configMapRequest(t, "CREATE", wideConfigMap("narrow", 10)))
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, want{allowed: true})
}

func TestReviewStopsAtItsDeadline(t *testing.T) {
	// Cost limits bound each binding, not a review: 30 bindings that each
	// spend most of their budget would run for many seconds. The deadline
	// interrupts the expression running and no other is started; the review
	// answers with the context's error, never with a decision made from
	// interrupted expressions, whatever the failurePolicy.
	const expr = "object.data.all(a, object.data.all(b, a != b || a == b))" // ~0.5M cost at 300 keys
	validations := make([]string, 15)
	for i := range validations {
		validations[i] = expr
	}
	for _, fp := range []string{"Fail", "Ignore"} {
		t.Run(fp, func(t *testing.T) {
			e := mustEngine(t, configMapPolicies(30, fp, validations...))
			req := configMapRequest(t, "CREATE", wideConfigMap("wide", 300))
			// One of the review's 450 expressions, timed here: the safety net
			// below is a hundred of them, so a loaded machine stretches both.
			one := mustEngine(t, configMapPolicies(1, fp, expr))
			start := time.Now()
			if _, err := one.Review(context.Background(), groupOf(t, one, "runaway-0"), req); err != nil {
				t.Fatal(err)
			}
			slack := 100 * time.Since(start)
			const budget = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start = time.Now()
			res, err := e.Review(ctx, groupOf(t, e, "runaway-0"), req)
			elapsed := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || res != nil {
				t.Fatalf("review past its deadline: result %+v, error %v; want context.DeadlineExceeded", res, err)
			}
			if want := "review did not finish in time: context deadline exceeded"; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			// Without interruption the review would take 450 expressions.
			if elapsed > budget+slack {
				t.Errorf("review returned %v after its deadline, more than a hundred expressions' %v", elapsed-budget, slack)
			}
		})
	}
}

func TestMutationStopsAtItsDeadline(t *testing.T) {
	var b, one strings.Builder
	for i := range 30 {
		var out io.Writer = &b
		if i == 0 {
			out = io.MultiWriter(&b, &one)
		}
		fmt.Fprintf(out, `---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata: {name: slow-%[1]d}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}
  reinvocationPolicy: Never
  variables:
  - {name: pairs, expression: "object.data.filter(a, object.data.exists(b, a != b && a == b)).size()"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"slow-%[1]d": string(variables.pairs)}}}'
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata: {name: slow-%[1]d}
spec: {policyName: slow-%[1]d}
`, i)
	}
	e := mustEngine(t, policy.Source{Name: "slow.yaml", Data: []byte(b.String())})
	req := configMapRequest(t, "CREATE", wideConfigMap("wide", 400))
	// One policy's mutation, undisturbed, timed here. Without the deadline
	// the review would take thirty of these; the safety net is ten, so a
	// loaded machine stretches both.
	single := mustEngine(t, policy.Source{Name: "one.yaml", Data: []byte(one.String())})
	start := time.Now()
	if _, err := single.Review(context.Background(), mutateRoute(t, single, "slow-0"), req); err != nil {
		t.Fatal(err)
	}
	slack := 10 * time.Since(start)
	const budget = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start = time.Now()
	res, err := e.Review(ctx, mutateRoute(t, e, "slow-0"), req)
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || res != nil {
		t.Fatalf("mutation past its deadline: result %+v, error %v; want context.DeadlineExceeded", res, err)
	}
	if elapsed > budget+slack {
		t.Errorf("mutation returned %v after its deadline, more than ten policies' %v", elapsed-budget, slack)
	}
}
