package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/validate"
)

// A Report names, for every validation of every matching binding, the
// policy, the binding, the validation's index and its decision: what
// admitfn apply reports.
func TestReportNamesBindingsAndValidations(t *testing.T) {
	e := mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas.example.com}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - {expression: object.spec.replicas <= 5, message: at most 5}
  - {expression: object.spec.replicas >= 2, message: at least 2}
  - {expression: object.spec.nope == 1}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: warn-everywhere}
spec: {policyName: replicas.example.com, validationActions: [Warn]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: not-this-team}
spec:
  policyName: replicas.example.com
  validationActions: [Deny]
  matchResources:
    objectSelector: {matchLabels: {team: other}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: deny-in-shop}
spec:
  policyName: replicas.example.com
  validationActions: [Deny]
  matchResources:
    objectSelector: {matchLabels: {team: shop}}
`)})
	req := decode(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "shop", object: deployment("web", "shop", 1, map[string]any{"team": "shop"})})
	// Each binding's selector makes a group of its own; the request goes
	// to each, as kube-apiserver sends it to each webhook.
	var evals []validate.Evaluation
	denied := 0
	for _, g := range e.Groups() {
		ctx, report := validate.WithReport(context.Background())
		res, err := e.Review(ctx, g.Route(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Response.Allowed {
			denied++
		}
		evals = append(evals, report.Evaluations...)
		// Without a Report nothing is recorded, and the answer is the same.
		plain, err := e.Review(context.Background(), g.Route(), req)
		if err != nil || !reflect.DeepEqual(plain.Response, res.Response) {
			t.Errorf("without a report: %v %+v", err, plain.Response)
		}
	}
	if denied != 1 {
		t.Errorf("%d groups denied, want 1 (deny-in-shop's)", denied)
	}
	var got []string
	for _, ev := range evals {
		got = append(got, ev.Binding+" "+ev.Policy+" "+string(rune('0'+ev.Index))+" "+string(ev.Evaluation)+" "+string(ev.Action)+" "+ev.Message)
	}
	want := []string{
		"warn-everywhere replicas.example.com 0 admit admit ",
		"warn-everywhere replicas.example.com 1 deny deny at least 2",
		"warn-everywhere replicas.example.com 2 error admit expression 'object.spec.nope == 1' resulted in error: no such key: nope",
		"deny-in-shop replicas.example.com 0 admit admit ",
		"deny-in-shop replicas.example.com 1 deny deny at least 2",
		"deny-in-shop replicas.example.com 2 error admit expression 'object.spec.nope == 1' resulted in error: no such key: nope",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("evaluations:\n%q\nwant\n%q", got, want)
	}
}
