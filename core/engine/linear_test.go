package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
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
	b, err := policy.Parse([]policy.Source{src})
	if err != nil {
		tb.Fatal(err)
	}
	e, err := New(b, compiler)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// BenchmarkL1Linear reviews Pods of 10,000 and 40,000 containers; make bench
// reports the ratio of their times (L1, target at most 5: linear time).
func BenchmarkL1Linear(b *testing.B) {
	e := linearEngine(b)
	for _, n := range []int{10000, 40000} {
		req := wideReview(b, n)
		b.Run(fmt.Sprintf("%dk-containers", n/1000), func(b *testing.B) {
			for b.Loop() {
				res, err := e.Review(context.Background(), policy.Route{Type: policy.Validating}, req)
				if err != nil || !res.Response.Allowed {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}
