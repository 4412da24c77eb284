package engine

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
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

// namespaces is a lister of whole namespaces, as an audit lists them.
type namespaces map[string]*corev1.Namespace

func (n namespaces) List(labels.Selector) ([]*corev1.Namespace, error) { return nil, nil }
func (n namespaces) Get(name string) (*corev1.Namespace, error)        { return n[name], nil }

// An engine WithNamespaces gives namespaceObject the whole namespace, as
// kube-apiserver's own policies see it; the function's sees its name only.
func TestWithNamespaces(t *testing.T) {
	e := mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: gold.example.com}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - {expression: "namespaceObject.metadata.labels.tier == 'gold'", message: gold namespaces only}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: gold}
spec: {policyName: gold.example.com, validationActions: [Deny]}
`)})
	req := func() *review.Request {
		return decode(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "shop", object: deployment("web", "shop", 2, nil)})
	}
	route := e.Groups()[0].Route()
	for _, tc := range []struct {
		name    string
		e       *Engine
		allowed bool
		message string
	}{
		{"the function's", e, false, "ValidatingAdmissionPolicy 'gold.example.com' with binding 'gold' denied request: expression 'namespaceObject.metadata.labels.tier == 'gold'' resulted in error: no such key: labels"},
		{"gold", e.WithNamespaces(namespaces{"shop": {ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"tier": "gold"}}}}), true, ""},
		{"silver", e.WithNamespaces(namespaces{"shop": {ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"tier": "silver"}}}}), false, "ValidatingAdmissionPolicy 'gold.example.com' with binding 'gold' denied request: gold namespaces only"},
	} {
		res, err := tc.e.Review(context.Background(), route, req())
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		if res.Response.Result != nil {
			msg = res.Response.Result.Message
		}
		if res.Response.Allowed != tc.allowed || msg != tc.message {
			t.Errorf("%s: allowed %v %q, want %v %q", tc.name, res.Response.Allowed, msg, tc.allowed, tc.message)
		}
	}
}
