package engine

import (
	"context"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

const idlePolicies = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: people-only}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  matchConditions:
  - {name: not-system, expression: "!request.userInfo.username.startsWith('system:')"}
  validations:
  - expression: "object.spec.replicas <= 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: people-only}
spec: {policyName: people-only, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  matchConditions:
  - {name: not-system, expression: "!request.userInfo.username.startsWith('system:')"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: 'Object{metadata: Object.metadata{labels: {"seen": "yes"}}}'}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label}
spec: {policyName: label}
`

// A review no binding acts on (its policy does not match, or its match
// conditions leave the request out) is idle: kube-apiserver called for
// nothing. One a binding acts on is not, whatever it decides.
func TestIdleReviews(t *testing.T) {
	e := mustEngine(t, policy.Source{Name: "idle.yaml", Data: []byte(idlePolicies)})
	for _, tc := range []struct {
		name, user, op string
		replicas       int64
		idle           bool
	}{
		{"a person's deployment", "alice", "CREATE", 1, false},
		{"denied", "alice", "CREATE", 9, false},
		{"a controller's, left out by the match conditions", "system:serviceaccount:kube-system:deployment-controller", "CREATE", 1, true},
		{"an operation no policy matches", "alice", "UPDATE", 1, true},
	} {
		for _, rt := range []policy.Route{{Type: policy.Validating}, {Type: policy.Mutating}} {
			d := deployment("web", "shop", tc.replicas, nil)
			body := admissionReview(t, reqOpts{operation: tc.op, group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "shop", object: d, oldObject: d, username: tc.user})
			req, err := review.Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Review(context.Background(), rt, req)
			if err != nil {
				t.Fatal(err)
			}
			if rt.Type == policy.Mutating && tc.replicas == 9 {
				// The mutation runs whatever the replicas.
				tc.idle = false
			}
			if res.Idle != tc.idle {
				t.Errorf("%s on %s: idle %v, want %v", tc.name, rt.Path(), res.Idle, tc.idle)
			}
		}
	}
}
