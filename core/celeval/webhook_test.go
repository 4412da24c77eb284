package celeval

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
)

func TestExpressionReads(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		vars     []string
		resource bool
	}{
		{`!request.userInfo.username.startsWith('system:')`, []string{"request"}, false},
		{`request.resource.group != "rbac.authorization.k8s.io"`, []string{"request"}, true},
		{`request == null`, []string{"request"}, true},
		{`object.spec.containers.all(c, c.image != '')`, []string{"object"}, false},
		// A comprehension's variable is a local, even named like an input;
		// its range is read outside its scope.
		{`[1].all(params, params > 0)`, nil, false},
		{`params.list.all(params, params > 0)`, []string{"params"}, false},
		{`object.spec.all(i, namespaceObject, i == namespaceObject)`, []string{"object"}, false},
		{`namespaceObject.metadata.name == 'a' && variables.x`, []string{"namespaceObject", "variables"}, false},
		{`authorizer.group('').resource('pods').check('create').allowed()`, []string{"authorizer"}, false},
	} {
		r, err := ExpressionReads(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if fmt.Sprint(r.Variables) != fmt.Sprint(tc.vars) || r.RequestResource != tc.resource {
			t.Errorf("%s: reads %v, request.resource %v; want %v, %v", tc.expr, r.Variables, r.RequestResource, tc.vars, tc.resource)
		}
	}
}

func TestCheckWebhookCondition(t *testing.T) {
	for _, tc := range []struct {
		expr      string
		cost      uint64
		unbounded bool
		refused   bool
	}{
		{`!request.userInfo.username.startsWith('system:')`, 5, false, false},
		{`has(request.name) && request.name in ["a", "b"]`, 15, false, false},
		// Linear in a list that may hold millions of entries.
		{`"system:nodes" in request.userInfo.groups`, 0, true, false},
		{`object.spec.containers.all(c, c.image != '')`, 0, true, false},
		// kube-apiserver declares no params for a webhook's conditions.
		{`params.x == 1`, 0, false, true},
		{`object.metadata.name`, 0, false, true},
	} {
		cost, err := CheckWebhookCondition(tc.expr)
		switch {
		case tc.unbounded:
			if !IsUnbounded(err) {
				t.Errorf("%s: %d, %v; want no bound", tc.expr, cost, err)
			}
		case tc.refused:
			if err == nil || IsUnbounded(err) {
				t.Errorf("%s: %d, %v; want refused", tc.expr, cost, err)
			}
		case err != nil || cost != tc.cost:
			t.Errorf("%s: %d, %v; want %d", tc.expr, cost, err, tc.cost)
		}
	}
}

// What `in` costs at runtime, over a list or a map, is within its bound at
// the size of the list or map.
func TestInBoundHoldsAtRuntime(t *testing.T) {
	celEnv, err := webhookEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 100, 4096} {
		groups := make([]any, n)
		labels := map[string]any{}
		for i := range groups {
			groups[i] = fmt.Sprintf("g%d", i)
			labels[fmt.Sprintf("k%d", i)] = "v"
		}
		vars := map[string]any{
			"request": map[string]any{"userInfo": map[string]any{"groups": groups}},
			"object":  map[string]any{"metadata": map[string]any{"labels": labels}},
		}
		for _, expr := range []string{`"absent" in request.userInfo.groups`, `"absent" in object.metadata.labels`} {
			checked, issues := celEnv.Compile(expr)
			if issues.Err() != nil {
				t.Fatal(issues.Err())
			}
			prog, err := celEnv.Program(checked, cel.EvalOptions(cel.OptTrackCost))
			if err != nil {
				t.Fatal(err)
			}
			_, det, err := prog.Eval(vars)
			if err != nil {
				t.Fatal(err)
			}
			bound, err := webhookBound(expr, uint64(n))
			if err != nil || *det.ActualCost() > bound {
				t.Errorf("%s over %d entries: cost %d, bound %d (%v)", expr, n, *det.ActualCost(), bound, err)
			}
		}
	}
}
