package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// want is the exact outcome of a review.
type want struct {
	allowed     bool
	code        int32
	reason      string
	message     string
	warnings    []string
	annotations map[string]string
}

func check(t *testing.T, res *Result, w want) {
	t.Helper()
	r := res.Response
	got := want{allowed: r.Allowed, warnings: r.Warnings, annotations: r.AuditAnnotations}
	if r.Result != nil {
		got.code, got.reason, got.message = r.Result.Code, string(r.Result.Reason), r.Result.Message
		if r.Result.Status != "Failure" {
			t.Errorf("status.status = %q, want Failure", r.Result.Status)
		}
	}
	if r.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
		t.Errorf("uid = %q", r.UID)
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("review outcome\n got: %#v\nwant: %#v", got, w)
	}
}

func denied(code int32, reason, message string) want {
	return want{code: code, reason: reason, message: message}
}

// groupOf finds the route group serving a binding.
func groupOf(t *testing.T, e *Engine, binding string) policy.Route {
	t.Helper()
	for _, g := range e.Groups() {
		for _, b := range g.Bindings {
			if b.Name == binding {
				return g.Route()
			}
		}
	}
	t.Fatalf("no group serves binding %q", binding)
	return policy.Route{}
}

func reviewOn(t *testing.T, e *Engine, binding string, req *review.Request) *Result {
	t.Helper()
	res, err := e.Review(context.Background(), groupOf(t, e, binding), req)
	if err != nil {
		t.Fatalf("Review: %v", err)
	}
	return res
}

func decode(t *testing.T, o reqOpts) *review.Request {
	t.Helper()
	r, err := review.Decode(admissionReview(t, o))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The documented examples of the ValidatingAdmissionPolicy page, with the
// messages the documentation shows.
func TestDocumentedExamples(t *testing.T) {
	t.Run("basic replica limit in test namespaces", func(t *testing.T) {
		e := loadExamples(t, "01-basic.yaml")
		check(t, reviewOn(t, e, "demo-binding-test.example.com", deploymentRequest(t, "CREATE", deployment("nginx", "test-ns", 6, nil))),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"))
		check(t, reviewOn(t, e, "demo-binding-test.example.com", deploymentRequest(t, "UPDATE", deployment("nginx", "test-ns", 5, nil))), want{allowed: true})
	})
	t.Run("params with two bindings split by namespace label", func(t *testing.T) {
		e := loadExamples(t, "02-params.yaml")
		check(t, reviewOn(t, e, "replicalimit-binding-test.example.com", deploymentRequest(t, "CREATE", deployment("nginx", "test-ns", 4, nil))),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'replicalimit-binding-test.example.com' denied request: failed expression: object.spec.replicas <= params.maxReplicas"))
		check(t, reviewOn(t, e, "replicalimit-binding-test.example.com", deploymentRequest(t, "CREATE", deployment("nginx", "test-ns", 3, nil))), want{allowed: true})
		check(t, reviewOn(t, e, "replicalimit-binding-nontest", deploymentRequest(t, "CREATE", deployment("nginx", "prod", 101, nil))),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'replicalimit-binding-nontest' denied request: failed expression: object.spec.replicas <= params.maxReplicas"))
		check(t, reviewOn(t, e, "replicalimit-binding-nontest", deploymentRequest(t, "CREATE", deployment("nginx", "prod", 100, nil))), want{allowed: true})
		if a, b := groupOf(t, e, "replicalimit-binding-test.example.com"), groupOf(t, e, "replicalimit-binding-nontest"); a == b {
			t.Errorf("bindings with different namespace selectors share group %q", a)
		}
	})
	t.Run("messageExpression", func(t *testing.T) {
		// Verbatim from the documentation, which applies it to Deployments.
		e := mustEngine(t, policy.Source{Name: "doc.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "deploy-replica-policy.example.com"
spec:
  paramKind:
    apiVersion: rules.example.com/v1
    kind: ReplicaLimit
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
  - expression: "object.spec.replicas <= params.maxReplicas"
    messageExpression: "'object.spec.replicas must be no greater than ' + string(params.maxReplicas)"
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "demo-binding-test.example.com"
spec:
  policyName: "deploy-replica-policy.example.com"
  validationActions: [Deny]
  paramRef:
    name: "replica-limit-test.example.com"
    namespace: "default"
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
---
apiVersion: rules.example.com/v1
kind: ReplicaLimit
metadata:
  name: "replica-limit-test.example.com"
  namespace: "default"
maxReplicas: 3
`)})
		check(t, reviewOn(t, e, "demo-binding-test.example.com", deploymentRequest(t, "CREATE", deployment("nginx", "default", 5, nil))),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'deploy-replica-policy.example.com' with binding 'demo-binding-test.example.com' denied request: object.spec.replicas must be no greater than 3"))
	})
	t.Run("messageExpression example of the bundle on StatefulSets", func(t *testing.T) {
		e := loadExamples(t, "02-params.yaml", "03-message-expression.yaml")
		sts := deployment("db", "test-ns", 4, nil)
		sts["kind"] = "StatefulSet"
		req := decode(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "statefulsets", kind: "StatefulSet", name: "db", namespace: "test-ns", object: sts})
		check(t, reviewOn(t, e, "demo-binding-test.example.com-statefulsets", req),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'deploy-replica-policy.example.com' with binding 'demo-binding-test.example.com-statefulsets' denied request: object.spec.replicas must be no greater than 3"))
	})
	t.Run("optional params selected in the request namespace", func(t *testing.T) {
		e := loadExamples(t, "04-optional-params.yaml")
		check(t, reviewOn(t, e, "min-replicas-binding.example.com", deploymentRequest(t, "CREATE", deployment("api", "production", 1, nil))),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'min-replicas.example.com' with binding 'min-replicas-binding.example.com' denied request: at least 2 replicas are required in namespace production"))
		check(t, reviewOn(t, e, "min-replicas-binding.example.com", deploymentRequest(t, "CREATE", deployment("api", "production", 2, nil))), want{allowed: true})
		// No param in this namespace: parameterNotFoundAction Allow.
		check(t, reviewOn(t, e, "min-replicas-binding.example.com", deploymentRequest(t, "CREATE", deployment("api", "dev", 1, nil))), want{allowed: true})
	})
	t.Run("auditAnnotations and the Audit action", func(t *testing.T) {
		e := loadExamples(t, "05-audit-annotations.yaml")
		check(t, reviewOn(t, e, "high-replica-count-audit.example.com", deploymentRequest(t, "CREATE", deployment("big", "default", 128, nil))), want{
			allowed: true,
			annotations: map[string]string{
				"high-replica-count.example.com_high-replica-count": "Deployment spec.replicas set to 128",
				"validation_failure": `[{"message":"Deployment spec.replicas set to 128","policy":"high-replica-count.example.com","binding":"high-replica-count-audit.example.com","expressionIndex":0,"validationActions":["Audit"]}]`,
			},
		})
		check(t, reviewOn(t, e, "high-replica-count-audit.example.com", deploymentRequest(t, "CREATE", deployment("small", "default", 3, nil))), want{allowed: true})
	})
	t.Run("variables with Warn", func(t *testing.T) {
		e := loadExamples(t, "06-variables.yaml")
		const b = "image-matches-environment-warn.example.com"
		check(t, reviewOn(t, e, b, deploymentRequest(t, "CREATE", deployment("web", "default", 1, map[string]any{"environment": "prod"}, "example.com/nginx"))), want{
			allowed:  true,
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'image-matches-environment.policy.example.com' with binding 'image-matches-environment-warn.example.com': only prod images are allowed in namespace default"},
		})
		check(t, reviewOn(t, e, b, deploymentRequest(t, "CREATE", deployment("web", "default", 1, map[string]any{"environment": "staging"}, "staging.example.com/nginx", "docker.io/busybox"))), want{allowed: true})
		check(t, reviewOn(t, e, b, deploymentRequest(t, "CREATE", deployment("web", "default", 1, map[string]any{"exempt": "true"}, "example.com/nginx"))), want{allowed: true})
		// No labels at all: the environment defaults to prod.
		check(t, reviewOn(t, e, b, deploymentRequest(t, "CREATE", deployment("web", "default", 1, nil, "prod.example.com/nginx"))), want{allowed: true})
	})
	t.Run("matchConditions", func(t *testing.T) {
		e := loadExamples(t, "07-match-conditions.yaml")
		const b = "demo-name-prefix-binding.example.com"
		pod := func(name string) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"admitfn.example.com/demo": "true"}}}
		}
		podReq := func(name string, groups ...string) *review.Request {
			return decode(t, reqOpts{operation: "CREATE", version: "v1", resource: "pods", kind: "Pod", name: name, namespace: "default", object: pod(name), groups: groups})
		}
		check(t, reviewOn(t, e, b, podReq("web")),
			denied(422, "Invalid", "ValidatingAdmissionPolicy 'demo-name-prefix.example.com' with binding 'demo-name-prefix-binding.example.com' denied request: failed expression: object.metadata.name.startsWith('demo')"))
		check(t, reviewOn(t, e, b, podReq("demo-web")), want{allowed: true})
		check(t, reviewOn(t, e, b, podReq("web", "system:nodes")), want{allowed: true})
		lease := decode(t, reqOpts{operation: "CREATE", group: "coordination.k8s.io", version: "v1", resource: "leases", kind: "Lease", name: "web", namespace: "default",
			object: map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "web", "labels": map[string]any{"admitfn.example.com/demo": "true"}}}})
		check(t, reviewOn(t, e, b, lease), want{allowed: true})
		// Not labelled: the objectSelector, which the apiserver also applies,
		// keeps the policy out.
		unlabelled := pod("web")
		delete(unlabelled["metadata"].(map[string]any), "labels")
		check(t, reviewOn(t, e, b, decode(t, reqOpts{operation: "CREATE", version: "v1", resource: "pods", kind: "Pod", name: "web", namespace: "default", object: unlabelled})), want{allowed: true})
	})
}

// bundle renders one policy and one binding from their spec bodies.
func bundle(policySpec, bindingSpec string, extra ...string) policy.Source {
	doc := "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n" + indent(policySpec) +
		"---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec:\n  policyName: p\n" + indent(bindingSpec)
	for _, x := range extra {
		doc += "---\n" + x
	}
	return policy.Source{Name: "case.yaml", Data: []byte(doc)}
}

func indent(s string) string {
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out.WriteString("  " + line + "\n")
	}
	return out.String()
}

const deploymentsRule = "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE, DELETE], resources: [deployments]}]\n"

const denyMsg = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: "

func TestDecisions(t *testing.T) {
	dep := func(replicas int64) *review.Request {
		return deploymentRequest(t, "CREATE", deployment("web", "default", replicas, map[string]any{"app": "web"}))
	}
	for _, tc := range []struct {
		name    string
		policy  string
		binding string
		extra   []string
		req     func() *review.Request
		want    want
	}{
		{name: "reason Forbidden is 403", policy: deploymentsRule + "validations: [{expression: 'false', reason: Forbidden}]", binding: "validationActions: [Deny]",
			want: denied(403, "Forbidden", denyMsg+"failed expression: false")},
		{name: "reason RequestEntityTooLarge is 413", policy: deploymentsRule + "validations: [{expression: 'false', reason: RequestEntityTooLarge}]", binding: "validationActions: [Deny]",
			want: denied(413, "RequestEntityTooLarge", denyMsg+"failed expression: false")},
		{name: "first failing validation decides message and reason", policy: deploymentsRule + "validations: [{expression: 'true'}, {expression: 'false', message: first, reason: Forbidden}, {expression: 'false', message: second}]", binding: "validationActions: [Deny]",
			want: denied(403, "Forbidden", denyMsg+"first")},
		{name: "Warn", policy: deploymentsRule + "validations: [{expression: 'object.spec.replicas < 2', message: too many}]", binding: "validationActions: [Warn]",
			want: want{allowed: true, warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': too many"}}},
		{name: "Warn and Audit", policy: deploymentsRule + "validations: [{expression: 'true'}, {expression: 'object.spec.replicas < 2', message: too many}]", binding: "validationActions: [Warn, Audit]",
			want: want{allowed: true, warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': too many"},
				annotations: map[string]string{"validation_failure": `[{"message":"too many","policy":"p","binding":"b","expressionIndex":1,"validationActions":["Warn","Audit"]}]`}}},
		// Kubernetes 1.37 publishes every failure of a review in one
		// annotation (up to 50); 1.36 kept only the first.
		{name: "Audit of two failures: one annotation listing both", policy: deploymentsRule + "validations: [{expression: 'false', message: first}, {expression: 'true'}, {expression: 'false', message: second}]", binding: "validationActions: [Audit]",
			want: want{allowed: true,
				annotations: map[string]string{"validation_failure": `[{"message":"first","policy":"p","binding":"b","expressionIndex":0,"validationActions":["Audit"]},{"message":"second","policy":"p","binding":"b","expressionIndex":2,"validationActions":["Audit"]}]`}}},
		{name: "Deny and Audit", policy: deploymentsRule + "validations: [{expression: 'false', message: nope}]", binding: "validationActions: [Deny, Audit]",
			want: want{code: 422, reason: "Invalid", message: denyMsg + "nope",
				annotations: map[string]string{"validation_failure": `[{"message":"nope","policy":"p","binding":"b","expressionIndex":0,"validationActions":["Deny","Audit"]}]`}}},
		{name: "messageExpression falls back to message when it fails", policy: deploymentsRule + "validations: [{expression: 'false', message: static, messageExpression: \"object.missing + 'x'\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"static")},
		{name: "messageExpression falls back when empty", policy: deploymentsRule + "validations: [{expression: 'false', message: static, messageExpression: \"'  '\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"static")},
		{name: "messageExpression with a line break falls back", policy: deploymentsRule + "validations: [{expression: 'false', message: static, messageExpression: \"'a\\\\nb'\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"static")},
		{name: "messageExpression longer than 5 KiB falls back", policy: deploymentsRule + "validations: [{expression: 'false', message: static, messageExpression: \"string(object.metadata.annotations['long'])\"}]", binding: "validationActions: [Deny]",
			req:  func() *review.Request { return annotated(t, strings.Repeat("x", 5121)) },
			want: denied(422, "Invalid", denyMsg+"static")},
		{name: "messageExpression of exactly 5 KiB is used", policy: deploymentsRule + "validations: [{expression: 'false', messageExpression: \"string(object.metadata.annotations['long'])\"}]", binding: "validationActions: [Deny]",
			req:  func() *review.Request { return annotated(t, strings.Repeat("x", 5120)) },
			want: denied(422, "Invalid", denyMsg+strings.Repeat("x", 5120))},
		{name: "no message: the expression is quoted", policy: deploymentsRule + "validations: [{expression: '  object.spec.replicas < 2  ', messageExpression: \"''\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"failed expression: object.spec.replicas < 2")},
		{name: "runtime error under Fail denies", policy: deploymentsRule + "validations: [{expression: \"object.metadata.annotations['x'] == 'y'\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"expression 'object.metadata.annotations['x'] == 'y'' resulted in error: no such key: annotations")},
		{name: "runtime error under Ignore admits", policy: "failurePolicy: Ignore\n" + deploymentsRule + "validations: [{expression: \"object.metadata.annotations['x'] == 'y'\"}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "runtime error with Warn warns", policy: deploymentsRule + "validations: [{expression: \"object.metadata.annotations['x'] == 'y'\"}]", binding: "validationActions: [Warn]",
			want: want{allowed: true, warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': expression 'object.metadata.annotations['x'] == 'y'' resulted in error: no such key: annotations"}}},
		{name: "matchCondition false skips the policy", policy: deploymentsRule + "matchConditions: [{name: big, expression: 'object.spec.replicas > 10'}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "matchCondition false wins over another's error", policy: deploymentsRule + "matchConditions: [{name: err, expression: \"object.metadata.annotations['x'] == 'y'\"}, {name: big, expression: 'object.spec.replicas > 10'}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "matchCondition error under Fail denies", policy: deploymentsRule + "matchConditions: [{name: err, expression: \"object.metadata.annotations['x'] == 'y'\"}]\nvalidations: [{expression: 'true'}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"expression 'object.metadata.annotations['x'] == 'y'' resulted in error: no such key: annotations")},
		{name: "matchCondition error under Ignore skips", policy: "failurePolicy: Ignore\n" + deploymentsRule + "matchConditions: [{name: err, expression: \"object.metadata.annotations['x'] == 'y'\"}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "variables are lazy: an unused failing variable is harmless", policy: deploymentsRule + "variables: [{name: broken, expression: 'object.missing'}, {name: count, expression: 'object.spec.replicas'}]\nvalidations: [{expression: 'variables.count < 2', messageExpression: \"'replicas: ' + string(variables.count)\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"replicas: 3")},
		{name: "variables see earlier variables", policy: deploymentsRule + "variables: [{name: a, expression: 'object.spec.replicas'}, {name: b, expression: 'variables.a * 2'}]\nvalidations: [{expression: 'variables.b == 6'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "a failing variable fails the expression using it", policy: deploymentsRule + "variables: [{name: broken, expression: 'object.missing'}]\nvalidations: [{expression: 'variables.broken == 1'}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: missing")},
		{name: "namespaceObject carries the request namespace's name", policy: deploymentsRule + "validations: [{expression: \"namespaceObject.metadata.name == 'default'\"}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "namespaceObject labels are unknown: error under Fail", policy: deploymentsRule + "validations: [{expression: \"namespaceObject.metadata.labels['env'] == 'prod'\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"expression 'namespaceObject.metadata.labels['env'] == 'prod'' resulted in error: no such key: labels")},
		{name: "authorizer is unavailable: error under Fail", policy: deploymentsRule + "validations: [{expression: \"authorizer.group('').resource('pods').namespace('default').check('get').allowed()\"}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"expression 'authorizer.group('').resource('pods').namespace('default').check('get').allowed()' resulted in error: no such attribute(s): authorizer")},
		{name: "request variables", policy: deploymentsRule + "validations: [{expression: \"request.operation == 'CREATE' && request.userInfo.username == 'alice' && request.kind.kind == 'Deployment' && request.resource.resource == 'deployments' && request.requestKind.group == 'apps' && request.dryRun == false && request.namespace == 'default' && request.name == 'web' && 'system:authenticated' in request.userInfo.groups\"}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "binding objectSelector not matching", policy: deploymentsRule + "validations: [{expression: 'false'}]", binding: "validationActions: [Deny]\nmatchResources: {objectSelector: {matchLabels: {app: other}}}",
			want: want{allowed: true}},
		{name: "binding objectSelector matching", policy: deploymentsRule + "validations: [{expression: 'false'}]", binding: "validationActions: [Deny]\nmatchResources: {objectSelector: {matchLabels: {app: web}}}",
			want: denied(422, "Invalid", denyMsg+"failed expression: false")},
		{name: "binding resourceRules narrow the policy", policy: deploymentsRule + "validations: [{expression: 'false'}]", binding: "validationActions: [Deny]\nmatchResources: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}]}",
			want: want{allowed: true}},
		{name: "resourceNames", policy: "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments], resourceNames: [other]}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "excludeResourceRules", policy: deploymentsRule + "  excludeResourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments], resourceNames: [web]}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "scope Cluster does not match a namespaced request", policy: "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: ['*'], resources: ['*'], scope: Cluster}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "wildcards match", policy: "matchConstraints:\n  resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*'], scope: Namespaced}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: denied(422, "Invalid", denyMsg+"failed expression: false")},
		{name: "operation not listed", policy: "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}]\nvalidations: [{expression: 'false'}]", binding: "validationActions: [Deny]",
			want: want{allowed: true}},
		{name: "missing param with parameterNotFoundAction Deny", policy: "paramKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'true'}]", binding: "validationActions: [Deny]\nparamRef: {name: limits, parameterNotFoundAction: Deny}",
			want: denied(422, "Invalid", denyMsg+"failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")},
		{name: "missing param with parameterNotFoundAction Deny under failurePolicy Ignore", policy: "failurePolicy: Ignore\nparamKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'false'}]", binding: "validationActions: [Deny]\nparamRef: {name: limits, parameterNotFoundAction: Deny}",
			want: want{allowed: true}},
		{name: "missing param with parameterNotFoundAction Allow", policy: "paramKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'false'}]", binding: "validationActions: [Deny]\nparamRef: {name: limits, parameterNotFoundAction: Allow}",
			want: want{allowed: true}},
		{name: "ConfigMap param found in the request namespace", policy: "paramKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'object.spec.replicas <= int(params.data.max)', messageExpression: \"'max ' + params.data.max + ' from ' + params.metadata.namespace\"}]",
			binding: "validationActions: [Deny]\nparamRef: {name: limits, parameterNotFoundAction: Deny}",
			extra:   []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: limits, namespace: default}\ndata: {max: '2'}\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: limits, namespace: other}\ndata: {max: '9'}\n"},
			want:    denied(422, "Invalid", denyMsg+"max 2 from default")},
		{name: "params by selector: every param must pass; first denial reported in name order", policy: "paramKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'object.spec.replicas <= int(params.data.max)', messageExpression: \"'limit ' + params.metadata.name\"}]",
			binding: "validationActions: [Deny]\nparamRef: {namespace: policy-params, selector: {matchLabels: {limit: 'true'}}, parameterNotFoundAction: Deny}",
			extra: []string{
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z-two, namespace: policy-params, labels: {limit: 'true'}}\ndata: {max: '2'}\n",
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a-ten, namespace: policy-params, labels: {limit: 'true'}}\ndata: {max: '10'}\n",
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m-one, namespace: policy-params}\ndata: {max: '1'}\n",
			},
			want: denied(422, "Invalid", denyMsg+"limit z-two")},
		{name: "cluster-scoped params by name", policy: "paramKind: {apiVersion: example.com/v1, kind: Limit}\n" + deploymentsRule + "validations: [{expression: 'object.spec.replicas <= params.max', message: over}]",
			binding: "validationActions: [Deny]\nparamRef: {name: global, parameterNotFoundAction: Deny}",
			extra:   []string{"apiVersion: example.com/v1\nkind: Limit\nmetadata: {name: global}\nmax: 1\n"},
			want:    denied(422, "Invalid", denyMsg+"over")},
		{name: "namespace on a cluster-scoped paramKind is a configuration error", policy: "paramKind: {apiVersion: example.com/v1, kind: Limit}\n" + deploymentsRule + "validations: [{expression: 'true'}]",
			binding: "validationActions: [Deny]\nparamRef: {name: global, namespace: default, parameterNotFoundAction: Deny}",
			extra:   []string{"apiVersion: example.com/v1\nkind: Limit\nmetadata: {name: global}\nmax: 1\n"},
			want:    denied(422, "Invalid", denyMsg+"failed to configure binding: paramRef.namespace must not be provided for a cluster-scoped `paramKind`")},
		{name: "a policy with paramKind and a binding without paramRef sees null params", policy: "paramKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'params != null', message: params missing but required to bind to this policy}]",
			binding: "validationActions: [Deny]",
			want:    denied(422, "Invalid", denyMsg+"params missing but required to bind to this policy")},
		{name: "audit annotation values of several params are joined", policy: "paramKind: {apiVersion: v1, kind: ConfigMap}\n" + deploymentsRule + "validations: [{expression: 'true'}]\nauditAnnotations: [{key: seen, valueExpression: \"'param ' + params.metadata.name\"}, {key: none, valueExpression: 'null'}]",
			binding: "validationActions: [Audit]\nparamRef: {namespace: p, selector: {}, parameterNotFoundAction: Deny}",
			extra:   []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: p}\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two, namespace: p}\n"},
			want:    want{allowed: true, annotations: map[string]string{"p_seen": "param one, param two"}}},
		{name: "audit annotation error under Fail denies", policy: deploymentsRule + "auditAnnotations: [{key: k, valueExpression: 'string(object.missing)'}]", binding: "validationActions: [Audit]",
			want: denied(422, "Invalid", denyMsg+"expression 'string(object.missing)' resulted in error: no such key: missing")},
		{name: "audit annotation error under Ignore is dropped", policy: "failurePolicy: Ignore\n" + deploymentsRule + "auditAnnotations: [{key: k, valueExpression: 'string(object.missing)'}, {key: ok, valueExpression: \"'yes'\"}]", binding: "validationActions: [Audit]",
			want: want{allowed: true, annotations: map[string]string{"p_ok": "yes"}}},
		{name: "dry run is visible", policy: deploymentsRule + "validations: [{expression: 'request.dryRun', message: not a dry run}]", binding: "validationActions: [Deny]",
			req: func() *review.Request {
				return decode(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "default", object: deployment("web", "default", 1, nil), dryRun: true})
			},
			want: want{allowed: true}},
		{name: "DELETE: object is null, oldObject is set, objectSelector sees old labels", policy: deploymentsRule + "validations: [{expression: \"object == null && oldObject.metadata.name == 'web'\", message: unexpected}, {expression: 'false', message: protected}]",
			binding: "validationActions: [Deny]\nmatchResources: {objectSelector: {matchLabels: {protected: 'yes'}}}",
			req: func() *review.Request {
				return decode(t, reqOpts{operation: "DELETE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "default", oldObject: deployment("web", "default", 1, map[string]any{"protected": "yes"})})
			},
			want: denied(422, "Invalid", denyMsg+"protected")},
		{name: "subresource rules match only that subresource", policy: "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments/scale]}]\nvalidations: [{expression: 'object.spec.replicas <= 3', message: scale limit}]",
			binding: "validationActions: [Deny]",
			req:     func() *review.Request { return scaleRequest(t, 5) },
			want:    denied(422, "Invalid", denyMsg+"scale limit")},
		{name: "*/scale matches the scale subresource", policy: "matchConstraints:\n  resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: [UPDATE], resources: ['*/scale']}]\nvalidations: [{expression: \"request.subResource == 'scale' && request.kind.kind == 'Scale'\"}]",
			binding: "validationActions: [Deny]",
			req:     func() *review.Request { return scaleRequest(t, 5) },
			want:    want{allowed: true}},
		{name: "*/* matches every subresource", policy: "matchConstraints:\n  resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*/*']}]\nvalidations: [{expression: 'false', message: all}]",
			binding: "validationActions: [Deny]",
			req:     func() *review.Request { return scaleRequest(t, 5) },
			want:    denied(422, "Invalid", denyMsg+"all")},
		{name: "* does not match subresources", policy: "matchConstraints:\n  resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*']}]\nvalidations: [{expression: 'false'}]",
			binding: "validationActions: [Deny]",
			req:     func() *review.Request { return scaleRequest(t, 5) },
			want:    want{allowed: true}},
		{name: "a resource rule without subresource does not match a subresource", policy: "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}]\nvalidations: [{expression: 'false'}]",
			binding: "validationActions: [Deny]",
			req:     func() *review.Request { return scaleRequest(t, 5) },
			want:    want{allowed: true}},
		{name: "CONNECT pods/exec", policy: "matchConstraints:\n  resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CONNECT], resources: ['pods/*']}]\nvalidations: [{expression: \"!object.command.exists(c, c == 'sh')\", message: no shells}]",
			binding: "validationActions: [Deny]",
			req: func() *review.Request {
				return decode(t, reqOpts{operation: "CONNECT", version: "v1", resource: "pods", subResource: "exec", kind: "PodExecOptions", name: "web", namespace: "default",
					object: map[string]any{"apiVersion": "v1", "kind": "PodExecOptions", "command": []any{"sh"}, "stdin": true}})
			},
			want: denied(422, "Invalid", denyMsg+"no shells")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, bundle(tc.policy, tc.binding, tc.extra...))
			req := dep(3)
			if tc.req != nil {
				req = tc.req()
			}
			check(t, reviewOn(t, e, "b", req), tc.want)
		})
	}
}

// scaleRequest is an UPDATE of apps/v1 deployments/scale, whose kind is
// autoscaling/v1 Scale.
func scaleRequest(t *testing.T, replicas int64) *review.Request {
	scale := map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": map[string]any{"name": "web", "namespace": "default"}, "spec": map[string]any{"replicas": replicas}}
	return decode(t, reqOpts{operation: "UPDATE", group: "apps", version: "v1", resource: "deployments", subResource: "scale", kindGroup: "autoscaling", kind: "Scale", name: "web", namespace: "default", object: scale, oldObject: scale})
}

// annotated is a Deployment CREATE whose annotation "long" holds value.
func annotated(t *testing.T, value string) *review.Request {
	d := deployment("web", "default", 3, nil)
	d["metadata"].(map[string]any)["annotations"] = map[string]any{"long": value}
	return deploymentRequest(t, "CREATE", d)
}

func TestCostLimits(t *testing.T) {
	// A list of n integers in a custom resource.
	widgets := func(n int) *review.Request {
		items := make([]any, n)
		for i := range items {
			items[i] = int64(i)
		}
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"items": items}}
		return decode(t, reqOpts{operation: "CREATE", group: "example.com", version: "v1", resource: "widgets", kind: "Widget", name: "w", namespace: "default", object: obj})
	}
	const rule = "matchConstraints:\n  resourceRules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]\n"
	const cubic = "object.spec.items.all(x, object.spec.items.all(y, object.spec.items.all(z, x + y + z >= 0)))"
	const square = "object.spec.items.all(x, object.spec.items.all(y, x + y >= 0))"

	t.Run("per-expression limit", func(t *testing.T) {
		e := mustEngine(t, bundle(rule+"validations: [{expression: '"+cubic+"'}]", "validationActions: [Deny]"))
		check(t, reviewOn(t, e, "b", widgets(10)), want{allowed: true})
		check(t, reviewOn(t, e, "b", widgets(200)), denied(422, "Invalid", denyMsg+"expression '"+cubic+"' resulted in error: operation cancelled: actual cost limit exceeded"))
	})
	t.Run("per-expression limit under Ignore", func(t *testing.T) {
		e := mustEngine(t, bundle("failurePolicy: Ignore\n"+rule+"validations: [{expression: '"+cubic+"'}]", "validationActions: [Deny]"))
		check(t, reviewOn(t, e, "b", widgets(200)), want{allowed: true})
	})
	t.Run("runtime budget across expressions", func(t *testing.T) {
		// Each expression stays under the per-call limit; together they
		// exceed the 10,000,000 budget of one evaluation.
		var validations []string
		for range 60 {
			validations = append(validations, "{expression: '"+square+"'}")
		}
		e := mustEngine(t, bundle(rule+"validations: ["+strings.Join(validations, ", ")+"]", "validationActions: [Deny]"))
		check(t, reviewOn(t, e, "b", widgets(20)), want{allowed: true})
		check(t, reviewOn(t, e, "b", widgets(300)), denied(422, "Invalid", denyMsg+"validation failed due to running out of cost budget, no further validation rules will be run"))
	})
}

func TestCompileErrorsRejectTheBundleWithEveryError(t *testing.T) {
	src := policy.Source{Name: "broken.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  matchConditions: [{name: m, expression: "object.spec.replicas"}]
  variables: [{name: v, expression: "object.spec.replicas +"}]
  validations:
  - expression: "true"
  - expression: "object.spec.replicas > 'x'"
  - expression: "nosuchvar == 1"
    messageExpression: "1"
  auditAnnotations:
  - {key: a, valueExpression: "1"}
`)}
	b, err := policy.Parse([]policy.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(b, compiler)
	var errs policy.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("New: %v, want policy.Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"broken.yaml: policy broken.example.com: spec.variables[0].expression: compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.spec.replicas +\n | ......................^",
		"broken.yaml: policy broken.example.com: spec.matchConditions[0].expression: must evaluate to bool but got dyn",
		"broken.yaml: policy broken.example.com: spec.validations[2].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'nosuchvar' (in container '')\n | nosuchvar == 1\n | ^",
		"broken.yaml: policy broken.example.com: spec.auditAnnotations[0].valueExpression: must evaluate to one of [string null_type] but got int",
		"broken.yaml: policy broken.example.com: spec.validations[2].messageExpression: must evaluate to string but got int",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnknownRoute(t *testing.T) {
	e := loadExamples(t, "01-basic.yaml")
	req := deploymentRequest(t, "CREATE", deployment("web", "default", 1, nil))
	// A group ID the bundle does not have, and /validate when every binding
	// of the bundle lives in a selector group: both mean the webhook
	// configuration and the bundle have drifted apart.
	for _, group := range []policy.Route{{Group: "0000000000"}, {}} {
		if _, err := e.Review(context.Background(), group, req); !errors.Is(err, ErrUnknownRoute) {
			t.Errorf("group %q: err = %v, want ErrUnknownRoute", group, err)
		}
	}
}

func TestDeadlinePassedIsAnErrorNotADecision(t *testing.T) {
	e := loadExamples(t, "01-basic.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Review(ctx, groupOf(t, e, "demo-binding-test.example.com"), deploymentRequest(t, "CREATE", deployment("web", "default", 1, nil)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestWebhookAuditKey(t *testing.T) {
	long := strings.Repeat("p", 60) + ".example.com/key"
	for in, out := range map[string]string{
		"validation.policy.admission.k8s.io/validation_failure": "validation_failure",
		"demo-policy.example.com/high-replica-count":            "demo-policy.example.com_high-replica-count",
		long: strings.Repeat("p", 54) + "-" + "c856394e",
	} {
		if got := webhookAuditKey(in); got != out {
			t.Errorf("webhookAuditKey(%q) = %q, want %q", in, got, out)
		}
		if got := webhookAuditKey(in); len(got) > 63 {
			t.Errorf("key %q longer than 63", got)
		}
	}
}

func TestResponsesAreIndependentOfEachOther(t *testing.T) {
	// One engine, many reviews in parallel: per-review state must not leak.
	e := loadExamples(t, "05-audit-annotations.yaml", "06-variables.yaml")
	const b = "high-replica-count-audit.example.com"
	group := groupOf(t, e, b)
	errs := make(chan error, 32)
	for i := range 32 {
		go func() {
			replicas := int64(40 + i)
			res, err := e.Review(context.Background(), group, deploymentRequest(t, "CREATE", deployment("d", "default", replicas, nil)))
			switch {
			case err != nil:
				errs <- err
			case replicas > 50 && res.Response.AuditAnnotations["high-replica-count.example.com_high-replica-count"] != fmt.Sprintf("Deployment spec.replicas set to %d", replicas):
				errs <- fmt.Errorf("replicas %d: annotations %v", replicas, res.Response.AuditAnnotations)
			case replicas <= 50 && len(res.Response.AuditAnnotations) != 0:
				errs <- fmt.Errorf("replicas %d: unexpected annotations %v", replicas, res.Response.AuditAnnotations)
			default:
				errs <- nil
			}
		}()
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// Within one group (one webhook), when several policies deny, the answer
// names the first in bundle order (files by name, then documents), on
// every review: docs/differences.md's "Order".
func TestDenialOrderWithinAGroup(t *testing.T) {
	deny := func(name string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}
  validations: [{expression: "false", message: ` + name + ` denies}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec: {policyName: ` + name + `, validationActions: [Deny]}
`
	}
	// b.yaml's second document comes before c.yaml, whatever the names.
	e := mustEngine(t,
		policy.Source{Name: "c.yaml", Data: []byte(deny("aaa"))},
		policy.Source{Name: "b.yaml", Data: []byte(deny("zzz") + "---\n" + deny("mmm"))},
	)
	if n := len(e.Groups()); n != 1 {
		t.Fatalf("%d groups, want the three bindings in one", n)
	}
	for range 50 {
		res := reviewOn(t, e, "aaa", decode(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "dev", object: deployment("web", "dev", 1, nil)}))
		if res.Response.Allowed || res.Response.Result.Message != "ValidatingAdmissionPolicy 'zzz' with binding 'zzz' denied request: zzz denies" {
			t.Fatalf("answer %+v, want zzz's denial, the first in bundle order", res.Response.Result)
		}
	}
}
