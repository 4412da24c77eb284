package engine_test

import (
	"context"
	"fmt"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

func Example() {
	bundle, err := policy.Parse([]policy.Source{{Name: "replicas.yaml", Data: []byte(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations:
  - expression: object.spec.replicas <= 5
    messageExpression: "'at most 5 replicas, not ' + string(object.spec.replicas)"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas}
spec: {policyName: max-replicas.example.com, validationActions: [Deny]}
`)}})
	if err != nil {
		panic(err)
	}
	// Compile once, at load; review many times, concurrently.
	e, err := engine.New(bundle, celeval.NewCompiler())
	if err != nil {
		panic(err)
	}
	req, err := review.Decode([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
	  "uid":"1","operation":"CREATE","name":"web","namespace":"default",
	  "kind":{"group":"apps","version":"v1","kind":"Deployment"},
	  "resource":{"group":"apps","version":"v1","resource":"deployments"},
	  "object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":8}}}}`))
	if err != nil {
		panic(err)
	}
	for _, g := range e.Groups() {
		res, err := e.Review(context.Background(), g.Route(), req)
		if err != nil {
			panic(err)
		}
		fmt.Println(g.Path(), res.Response.Allowed, res.Response.Result.Code)
		fmt.Println(res.Response.Result.Message)
	}
	// Output:
	// /validate/8b3e12d787 false 422
	// ValidatingAdmissionPolicy 'max-replicas.example.com' with binding 'max-replicas' denied request: at most 5 replicas, not 8
}
