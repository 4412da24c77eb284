package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// policyDoc renders a policy named name with the given spec body (YAML,
// indented two spaces by the helper).
func policyDoc(name, spec string) string {
	return "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: " + name + "}\nspec:\n" + indentBy(spec, "  ")
}

func bindingDoc(name, policy, spec string) string {
	return "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: " + name + "}\nspec:\n  policyName: " + policy + "\n" + indentBy(spec, "  ")
}

func indentBy(s, by string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(by + l + "\n")
	}
	return b.String()
}

const (
	cmRules     = "matchConstraints:\n  resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE, UPDATE, DELETE], resources: [configmaps]}]\n"
	deployRules = "matchConstraints:\n  resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]\n"
)

// simple is one policy and one Deny binding named after the case.
func simple(name, spec, bindingSpec string) string {
	p := name + ".parity.admitfn.io"
	if bindingSpec == "" {
		bindingSpec = "validationActions: [Deny]"
	}
	return policyDoc(p, spec) + bindingDoc(name, p, bindingSpec)
}

// cm is a ConfigMap in the case's namespace.
func cm(name string, data map[string]string, labels ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n")
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for i := 0; i+1 < len(labels); i += 2 {
			fmt.Fprintf(&b, "    %s: %q\n", labels[i], labels[i+1])
		}
	}
	if len(data) > 0 {
		b.WriteString("data:\n")
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %q\n", k, data[k])
		}
	}
	return b.String()
}

// limit is a param of the e2e CRD kind Limit in the case's namespace.
func limit(name string, max int, labels ...string) string {
	lbl := ""
	for i := 0; i+1 < len(labels); i += 2 {
		lbl += fmt.Sprintf("%s: %q, ", labels[i], labels[i+1])
	}
	return fmt.Sprintf("apiVersion: rules.admitfn.io/v1\nkind: Limit\nmetadata: {name: %s, namespace: $NS, labels: {%s}}\nmax: %d\n", name, strings.TrimSuffix(lbl, ", "), max)
}

func deploy(name string, replicas int, image string, labels ...string) string {
	lbl := ""
	for i := 0; i+1 < len(labels); i += 2 {
		lbl += fmt.Sprintf("%s: %q, ", labels[i], labels[i+1])
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, labels: {%[4]sapp: %[1]s}}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: app, image: %[3]q}]
`, name, replicas, image, lbl)
}

func req(verb, object string) parityRequest { return parityRequest{verb: verb, object: object} }

func dry(object string) parityRequest { return req("dryrun", object) }

func data(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// celCase checks one CEL expression over a ConfigMap's data: a ConfigMap
// for which it holds, one for which it fails, and the message.
func celCase(name, expr string, pass, fail map[string]string) parityCase {
	return parityCase{
		name:     name,
		bundle:   simple(name, cmRules+"validations:\n- expression: "+fmt.Sprintf("%q", expr)+"\n  message: "+name+" failed", ""),
		requests: []parityRequest{dry(cm("pass", pass)), dry(cm("fail", fail))},
	}
}

func bigData(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%03d", i)] = "v"
	}
	return m
}

func parityCases() []parityCase {
	return []parityCase{
		// --- validations, messages, reasons
		{name: "failed-expression-message", bundle: simple("failed-expression-message", deployRules+"validations: [{expression: 'object.spec.replicas <= 5'}]", ""),
			requests: []parityRequest{dry(deploy("small", 2, "nginx")), dry(deploy("big", 6, "nginx"))}},
		{name: "static-message", bundle: simple("static-message", deployRules+"validations: [{expression: 'object.spec.replicas <= 5', message: 'too many replicas'}]", ""),
			requests: []parityRequest{dry(deploy("big", 6, "nginx"))}},
		{name: "message-expression", bundle: simple("message-expression", deployRules+"validations: [{expression: 'object.spec.replicas <= 5', messageExpression: \"'replicas ' + string(object.spec.replicas) + ' > 5'\"}]", ""),
			requests: []parityRequest{dry(deploy("big", 6, "nginx"))}},
		{name: "message-expression-error-falls-back", bundle: simple("message-expression-error-falls-back", deployRules+"validations: [{expression: 'false', message: static, messageExpression: \"string(object.metadata.annotations['x'])\"}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "message-expression-newline-falls-back", bundle: simple("message-expression-newline-falls-back", deployRules+"validations: [{expression: 'false', message: static, messageExpression: \"'a\\\\nb'\"}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "message-expression-blank-falls-back-to-expression", bundle: simple("message-expression-blank-falls-back-to-expression", deployRules+"validations: [{expression: 'false', messageExpression: \"'   '\"}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "reason-forbidden", bundle: simple("reason-forbidden", deployRules+"validations: [{expression: 'false', reason: Forbidden}]", ""), requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "reason-entity-too-large", bundle: simple("reason-entity-too-large", deployRules+"validations: [{expression: 'false', reason: RequestEntityTooLarge}]", ""), requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "first-failing-validation-wins", bundle: simple("first-failing-validation-wins", deployRules+"validations: [{expression: 'true'}, {expression: 'false', message: second, reason: Forbidden}, {expression: 'false', message: third}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},

		// --- validation actions
		{name: "warn", bundle: simple("warn", deployRules+"validations: [{expression: 'object.spec.replicas <= 5', message: many}]", "validationActions: [Warn]"),
			requests: []parityRequest{dry(deploy("big", 9, "nginx"))}},
		{name: "audit", bundle: simple("audit", deployRules+"validations: [{expression: 'object.spec.replicas <= 5', message: many}]", "validationActions: [Audit]"),
			requests: []parityRequest{dry(deploy("big", 9, "nginx"))}},
		{name: "warn-audit", bundle: simple("warn-audit", deployRules+"validations: [{expression: 'true'}, {expression: 'object.spec.replicas <= 5', message: many}]", "validationActions: [Warn, Audit]"),
			requests: []parityRequest{dry(deploy("big", 9, "nginx"))}},
		{name: "deny-audit", bundle: simple("deny-audit", deployRules+"validations: [{expression: 'object.spec.replicas <= 5', message: many}]", "validationActions: [Deny, Audit]"),
			requests: []parityRequest{dry(deploy("big", 9, "nginx"))}},

		// --- audit annotations
		{name: "audit-annotations", bundle: simple("audit-annotations", deployRules+"validations: [{expression: 'true'}]\nauditAnnotations:\n- {key: replicas, valueExpression: 'string(object.spec.replicas)'}\n- {key: none, valueExpression: 'null'}\n- {key: empty, valueExpression: \"''\"}", ""),
			requests: []parityRequest{dry(deploy("d", 3, "nginx"))}},
		{name: "audit-annotation-error-fail", bundle: simple("audit-annotation-error-fail", deployRules+"auditAnnotations: [{key: k, valueExpression: \"string(object.metadata.annotations['x'])\"}]", ""),
			requests: []parityRequest{dry(deploy("d", 3, "nginx"))}},
		{name: "audit-annotation-error-ignore", bundle: simple("audit-annotation-error-ignore", "failurePolicy: Ignore\n"+deployRules+"auditAnnotations: [{key: k, valueExpression: \"string(object.metadata.annotations['x'])\"}, {key: ok, valueExpression: \"'fine'\"}]", ""),
			requests: []parityRequest{dry(deploy("d", 3, "nginx"))}},

		// --- failurePolicy and runtime errors
		{name: "runtime-error-fail", bundle: simple("runtime-error-fail", cmRules+"validations: [{expression: \"object.data['missing'] == 'x'\"}]", ""),
			requests: []parityRequest{dry(cm("c", data("a", "b")))}},
		{name: "runtime-error-ignore", bundle: simple("runtime-error-ignore", "failurePolicy: Ignore\n"+cmRules+"validations: [{expression: \"object.data['missing'] == 'x'\"}]", ""),
			requests: []parityRequest{dry(cm("c", data("a", "b")))}},
		{name: "runtime-error-warn", bundle: simple("runtime-error-warn", cmRules+"validations: [{expression: \"object.data['missing'] == 'x'\"}]", "validationActions: [Warn]"),
			requests: []parityRequest{dry(cm("c", data("a", "b")))}},

		// --- matching
		{name: "operations", bundle: simple("operations", "matchConstraints:\n  resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [UPDATE], resources: [configmaps]}]\nvalidations: [{expression: \"object.data.v == oldObject.data.v\", message: immutable}]", ""),
			requests: []parityRequest{req("create", cm("c", data("v", "1"))), req("update", cm("c", data("v", "2"))), req("update", cm("c", data("v", "1", "w", "x")))}},
		{name: "delete-sees-old-object", bundle: simple("delete-sees-old-object", cmRules+"validations: [{expression: \"request.operation != 'DELETE' || !('keep' in oldObject.data)\", messageExpression: \"'cannot delete ' + oldObject.metadata.name\"}]", ""),
			requests: []parityRequest{req("create", cm("kept", data("keep", "yes"))), req("delete", cm("kept", nil)), req("create", cm("gone", data("x", "y"))), req("delete", cm("gone", nil))}},
		{name: "wildcards", bundle: simple("wildcards", "matchConstraints:\n  resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*'], scope: Namespaced}]\nmatchConditions: [{name: mine, expression: \"object != null && object.metadata.name == 'target'\"}]\nvalidations: [{expression: 'false', messageExpression: \"'no ' + request.kind.kind\"}]", ""),
			requests: []parityRequest{dry(cm("target", nil)), dry(deploy("target", 1, "nginx")), dry(cm("other", nil))}},
		{name: "resource-names", bundle: simple("resource-names", "matchConstraints:\n  resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps], resourceNames: [special]}]\nvalidations: [{expression: 'false', message: special}]", ""),
			requests: []parityRequest{dry(cm("special", nil)), dry(cm("ordinary", nil))}},
		{name: "exclude-resource-rules", bundle: simple("exclude-resource-rules", cmRules+"  excludeResourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: ['*'], resources: [configmaps], resourceNames: [exempt]}]\nvalidations: [{expression: 'false', message: not excluded}]", ""),
			requests: []parityRequest{dry(cm("exempt", nil)), dry(cm("other", nil))}},
		{name: "scope-cluster", bundle: simple("scope-cluster", "matchConstraints:\n  resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: [CREATE], resources: [priorityclasses, configmaps], scope: Cluster}]\nvalidations: [{expression: \"object.metadata.name.startsWith('parity-')\", message: cluster only}]", ""),
			requests: []parityRequest{dry("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"), dry(cm("ns-scoped", nil))}},
		{name: "policy-object-selector", bundle: simple("policy-object-selector", cmRules+"  objectSelector: {matchLabels: {check: 'yes'}}\nvalidations: [{expression: 'false', message: selected}]", ""),
			requests: []parityRequest{dry(cm("a", nil, "check", "yes")), dry(cm("b", nil, "check", "no"))}},
		{name: "binding-object-selector-expressions", bundle: simple("binding-object-selector-expressions", cmRules+"validations: [{expression: 'false', message: selected}]", "validationActions: [Deny]\nmatchResources: {objectSelector: {matchExpressions: [{key: tier, operator: In, values: [gold, silver]}, {key: legacy, operator: DoesNotExist}]}}"),
			requests: []parityRequest{dry(cm("a", nil, "tier", "gold")), dry(cm("b", nil, "tier", "gold", "legacy", "1")), dry(cm("c", nil, "tier", "bronze"))}},
		{name: "policy-namespace-selector-match", labels: map[string]string{"env": "prod"}, bundle: simple("policy-namespace-selector-match", cmRules+"  namespaceSelector: {matchLabels: {env: prod}}\nvalidations: [{expression: 'false', message: prod only}]", ""),
			requests: []parityRequest{dry(cm("a", nil))}},
		{name: "policy-namespace-selector-miss", labels: map[string]string{"env": "dev"}, bundle: simple("policy-namespace-selector-miss", cmRules+"  namespaceSelector: {matchLabels: {env: prod}}\nvalidations: [{expression: 'false', message: prod only}]", ""),
			requests: []parityRequest{dry(cm("a", nil))}},
		{name: "binding-namespace-selector-expressions", labels: map[string]string{"team": "a", "env": "test"}, bundle: simple("binding-namespace-selector-expressions", cmRules+"validations: [{expression: 'false', message: team rule}]", "validationActions: [Deny]\nmatchResources: {namespaceSelector: {matchExpressions: [{key: team, operator: Exists}, {key: env, operator: NotIn, values: [prod]}]}}"),
			requests: []parityRequest{dry(cm("a", nil))}},
		{name: "binding-resource-rules-narrow", bundle: simple("binding-resource-rules-narrow", cmRules+"validations: [{expression: 'false', message: narrowed}]", "validationActions: [Deny]\nmatchResources: {resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [UPDATE], resources: [configmaps]}]}"),
			requests: []parityRequest{req("create", cm("c", data("a", "1"))), req("update", cm("c", data("a", "2")))}},
		{name: "match-conditions", bundle: simple("match-conditions", cmRules+"matchConditions:\n- {name: labelled, expression: \"has(object.metadata.labels) && 'check' in object.metadata.labels\"}\n- {name: not-admin, expression: \"!('system:masters' in request.userInfo.groups) || true\"}\nvalidations: [{expression: 'false', message: conditioned}]", ""),
			requests: []parityRequest{dry(cm("a", nil, "check", "1")), dry(cm("b", nil))}},
		// Under Fail, a condition that fails is the policy's denial, 422 in
		// its words: push-down leaves it to the function (one no guard
		// covers) or guards it (a missing label).
		{name: "match-condition-error-fail", bundle: simple("match-condition-error-fail", cmRules+"matchConditions: [{name: broken, expression: \"object.data['nope'] == 'x'\"}]\nvalidations: [{expression: 'true'}]", ""),
			requests: []parityRequest{dry(cm("a", data("x", "y")))}},
		{name: "match-condition-missing-data-fail", bundle: simple("match-condition-missing-data-fail", cmRules+"matchConditions: [{name: missing, expression: \"object.data.missing == 'x'\"}]\nvalidations: [{expression: 'false', message: data}]", ""),
			requests: []parityRequest{dry(cm("nodata", nil)), dry(cm("x", data("missing", "x"))), dry(cm("y", data("missing", "y")))}},
		{name: "match-condition-missing-label-fail", bundle: simple("match-condition-missing-label-fail", cmRules+"matchConditions: [{name: web, expression: \"object.metadata.labels['tier'] == 'web'\"}]\nvalidations: [{expression: 'false', message: web tier}]", ""),
			requests: []parityRequest{dry(cm("nolabels", nil)), dry(cm("other", nil, "a", "b")), dry(cm("web", nil, "tier", "web")), dry(cm("db", nil, "tier", "db"))}},
		{name: "match-condition-missing-label-warn", bundle: simple("match-condition-missing-label-warn", cmRules+"matchConditions: [{name: web, expression: \"object.metadata.labels.tier == 'web'\"}]\nvalidations: [{expression: 'false', message: web tier}]", "validationActions: [Warn, Audit]"),
			requests: []parityRequest{dry(cm("nolabels", nil)), dry(cm("web", nil, "tier", "web")), dry(cm("db", nil, "tier", "db"))}},
		{name: "match-condition-error-ignore", bundle: simple("match-condition-error-ignore", "failurePolicy: Ignore\n"+cmRules+"matchConditions: [{name: broken, expression: \"object.data['nope'] == 'x'\"}]\nvalidations: [{expression: 'false'}]", ""),
			requests: []parityRequest{dry(cm("a", data("x", "y")))}},
		{name: "match-condition-false-beats-error", bundle: simple("match-condition-false-beats-error", cmRules+"matchConditions: [{name: broken, expression: \"object.data['nope'] == 'x'\"}, {name: never, expression: 'false'}]\nvalidations: [{expression: 'false'}]", ""),
			requests: []parityRequest{dry(cm("a", data("x", "y")))}},

		// --- variables
		{name: "variables", bundle: simple("variables", deployRules+"variables:\n- {name: images, expression: 'object.spec.template.spec.containers.map(c, c.image)'}\n- {name: untagged, expression: \"variables.images.filter(i, !i.contains(':'))\"}\nvalidations: [{expression: 'variables.untagged.size() == 0', messageExpression: \"'untagged: ' + variables.untagged.join(', ')\"}]", ""),
			requests: []parityRequest{dry(deploy("tagged", 1, "nginx:1.27")), dry(deploy("untagged", 1, "nginx"))}},
		{name: "variable-error-only-when-used", bundle: simple("variable-error-only-when-used", cmRules+"variables:\n- {name: broken, expression: \"object.data['nope']\"}\n- {name: size, expression: 'size(object.data)'}\nvalidations: [{expression: \"variables.size < 2 || variables.broken == 'x'\", message: used}]", ""),
			requests: []parityRequest{dry(cm("small", data("a", "1"))), dry(cm("large", data("a", "1", "b", "2")))}},

		// --- params
		{name: "param-by-name", bundle: simple("param-by-name", "paramKind: {apiVersion: v1, kind: ConfigMap}\n"+deployRules+"validations: [{expression: 'object.spec.replicas <= int(params.data.max)', messageExpression: \"'max ' + params.data.max\"}]",
			"validationActions: [Deny]\nparamRef: {name: limits, namespace: $NS, parameterNotFoundAction: Deny}") + "---\n" + strings.Replace(cm("limits", data("max", "3")), "metadata:\n", "metadata:\n  namespace: $NS\n", 1),
			requests: []parityRequest{dry(deploy("ok", 3, "nginx")), dry(deploy("big", 4, "nginx"))}},
		// Params that must be found use a CRD paramKind: kube-apiserver stops
		// the shared informer of a built-in paramKind (ConfigMap) once no
		// binding uses it and never restarts it (kubernetes/kubernetes#130887),
		// so only the first ConfigMap case above can rely on it natively.
		{name: "param-in-request-namespace", bundle: simple("param-in-request-namespace", "paramKind: {apiVersion: rules.admitfn.io/v1, kind: Limit}\n"+deployRules+"validations: [{expression: 'object.spec.replicas <= params.max', messageExpression: \"'max ' + string(params.max) + ' in ' + params.metadata.namespace\"}]",
			"validationActions: [Deny]\nparamRef: {name: limits, parameterNotFoundAction: Deny}") + "---\n" + limit("limits", 2),
			requests: []parityRequest{dry(deploy("ok", 2, "nginx")), dry(deploy("big", 4, "nginx"))}},
		{name: "params-by-selector-all-must-pass", bundle: simple("params-by-selector-all-must-pass", "paramKind: {apiVersion: rules.admitfn.io/v1, kind: Limit}\n"+deployRules+"validations: [{expression: 'object.spec.replicas <= params.max', messageExpression: \"'max ' + string(params.max)\"}]",
			"validationActions: [Deny]\nparamRef: {namespace: $NS, selector: {matchLabels: {limit: 'true'}}, parameterNotFoundAction: Deny}") +
			"---\n" + limit("one", 5, "limit", "true") + "---\n" + limit("two", 2, "limit", "true") + "---\n" + limit("unlabelled", 1),
			requests: []parityRequest{dry(deploy("ok", 2, "nginx")), dry(deploy("big", 4, "nginx"))}},
		{name: "param-cluster-selector-empty-set", bundle: simple("param-cluster-selector-empty-set", "paramKind: {apiVersion: rules.admitfn.io/v1, kind: Limit}\n"+deployRules+"validations: [{expression: 'false'}]",
			"validationActions: [Deny]\nparamRef: {namespace: $NS, selector: {matchLabels: {nothing: here}}, parameterNotFoundAction: Allow}") + "---\n" + limit("present", 1),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "param-not-found-deny", bundle: simple("param-not-found-deny", "paramKind: {apiVersion: v1, kind: ConfigMap}\n"+deployRules+"validations: [{expression: 'true'}]", "validationActions: [Deny]\nparamRef: {name: absent, parameterNotFoundAction: Deny}"),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "param-not-found-allow", bundle: simple("param-not-found-allow", "paramKind: {apiVersion: v1, kind: ConfigMap}\n"+deployRules+"validations: [{expression: 'false'}]", "validationActions: [Deny]\nparamRef: {name: absent, parameterNotFoundAction: Allow}"),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "param-not-found-deny-ignored", bundle: simple("param-not-found-deny-ignored", "failurePolicy: Ignore\nparamKind: {apiVersion: v1, kind: ConfigMap}\n"+deployRules+"validations: [{expression: 'false'}]", "validationActions: [Deny]\nparamRef: {name: absent, parameterNotFoundAction: Deny}"),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "no-param-ref-null-params", bundle: simple("no-param-ref-null-params", "paramKind: {apiVersion: v1, kind: ConfigMap}\n"+deployRules+"validations: [{expression: 'params != null', message: params missing but required to bind to this policy}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "audit-annotations-across-params", bundle: simple("audit-annotations-across-params", "paramKind: {apiVersion: rules.admitfn.io/v1, kind: Limit}\n"+deployRules+"auditAnnotations: [{key: seen, valueExpression: \"'by ' + params.metadata.name\"}]",
			"validationActions: [Audit]\nparamRef: {namespace: $NS, selector: {matchLabels: {audit: 'true'}}, parameterNotFoundAction: Deny}") +
			"---\n" + limit("alpha", 1, "audit", "true") + "---\n" + limit("beta", 1, "audit", "true"),
			requests: []parityRequest{req("create", deploy("d", 1, "nginx"))}},

		// --- several bindings, several policies
		{name: "two-bindings-one-policy", bundle: policyDoc("two-bindings.parity.admitfn.io", deployRules+"validations: [{expression: 'object.spec.replicas <= 5', message: limit}]") +
			bindingDoc("warn-all", "two-bindings.parity.admitfn.io", "validationActions: [Warn]") +
			bindingDoc("deny-labelled", "two-bindings.parity.admitfn.io", "validationActions: [Deny]\nmatchResources: {objectSelector: {matchLabels: {strict: 'yes'}}}"),
			requests: []parityRequest{dry(deploy("loose", 9, "nginx")), dry(deploy("strict", 9, "nginx", "strict", "yes"))}},

		// --- request variables
		{name: "request-fields", bundle: simple("request-fields", cmRules+"validations:\n- expression: \"request.operation == 'CREATE' && request.kind.kind == 'ConfigMap' && request.resource.resource == 'configmaps' && request.name == 'c' && request.namespace == object.metadata.namespace && request.userInfo.username == 'admin' && 'system:masters' in request.userInfo.groups\"\n  message: request fields", ""),
			requests: []parityRequest{dry(cm("c", nil)), req("create", cm("c", nil))}},
		{name: "request-dry-run", bundle: simple("request-dry-run", cmRules+"validations: [{expression: '!request.dryRun', message: no dry runs}]", ""),
			requests: []parityRequest{dry(cm("c", nil)), req("create", cm("real", nil))}},
		{name: "request-options", bundle: simple("request-options", cmRules+"validations: [{expression: \"request.options.kind == 'CreateOptions' && !has(request.options.fieldManager)\", messageExpression: \"'options ' + request.options.kind\"}]", ""),
			requests: []parityRequest{dry(cm("c", nil))}},

		// --- CEL libraries kube-apiserver enables
		celCase("lib-strings", "object.data.s.lowerAscii().split(',').size() == 3 && object.data.s.trim().startsWith('A') && object.data.s.replace('A', 'a').indexOf('b') == 2", data("s", "A,B,C"), data("s", "A,B")),
		celCase("lib-lists", "[3, 1, 2].sort() == [1, 2, 3] && [1, 2, 3].sum() == 6 && [1, 2].isSorted() && size(object.data) == 2", data("a", "1", "b", "2"), data("a", "1")),
		celCase("lib-regex", "object.data.v.matches('^v[0-9]+$') && object.data.v.find('[0-9]+') == '12'", data("v", "v12"), data("v", "x12")),
		celCase("lib-urls", "isURL(object.data.u) && url(object.data.u).getScheme() == 'https' && url(object.data.u).getHost() == 'example.com:8443'", data("u", "https://example.com:8443/p"), data("u", "http://example.com/p")),
		celCase("lib-quantity", "isQuantity(object.data.q) && quantity(object.data.q).compareTo(quantity('1Gi')) <= 0", data("q", "512Mi"), data("q", "2Gi")),
		celCase("lib-ip-cidr", "isIP(object.data.ip) && ip(object.data.ip).family() == 4 && cidr('10.0.0.0/8').containsIP(ip(object.data.ip))", data("ip", "10.1.2.3"), data("ip", "192.168.1.1")),
		celCase("lib-format", "!format.dns1123Label().validate(object.data.n).hasValue()", data("n", "good-name"), data("n", "Bad_Name")),
		celCase("lib-semver", "isSemver(object.data.v) && semver(object.data.v).isGreaterThan(semver('1.2.0'))", data("v", "1.10.0"), data("v", "1.1.9")),
		celCase("lib-sets", "sets.contains(['a', 'b', 'c'], object.data.l.split(',')) && !sets.intersects(['x'], object.data.l.split(','))", data("l", "a,c"), data("l", "a,x")),
		celCase("lib-optional", "object.data.?mode.orValue('safe') == 'safe' && optional.of(1).hasValue()", data("other", "1"), data("mode", "fast")),
		celCase("lib-two-variable-comprehension", "object.data.all(k, v, k.size() + v.size() < 6) && object.data.exists(k, v, v == 'x')", data("a", "x", "b", "yy"), data("a", "x", "long", "value")),
		celCase("lib-string-format", "'%s=%d'.format([object.data.k, size(object.data.k)]) == 'abc=3'", data("k", "abc"), data("k", "ab")),
		celCase("lib-list-index", "object.data.l.split(',').lastIndexOf('a') == 2 && object.data.l.split(',').indexOf('b') == 1", data("l", "a,b,a"), data("l", "b,a,a")),

		// --- cost limits
		{name: "cost-per-call-limit", bundle: simple("cost-per-call-limit", cmRules+"validations: [{expression: 'object.data.all(a, object.data.all(b, object.data.all(c, true)))'}]", ""),
			requests: []parityRequest{dry(cm("small", bigData(10))), dry(cm("large", bigData(150)))}},
		{name: "cost-runtime-budget", bundle: simple("cost-runtime-budget", cmRules+"validations:\n"+strings.Repeat("- expression: 'object.data.all(a, object.data.all(b, a != b || a == b))'\n", 40), ""),
			requests: []parityRequest{dry(cm("small", bigData(10))), dry(cm("large", bigData(400)))}},

		// --- subtle paths
		{name: "namespaces-resource-selector-own-labels", bundle: simple("namespaces-resource-selector-own-labels", "matchConstraints:\n  resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [namespaces]}]\n  namespaceSelector: {matchLabels: {tenant: 'yes'}}\nvalidations: [{expression: 'namespaceObject == null && object.metadata.name.startsWith(\"tenant-\")', messageExpression: \"'tenant namespaces are named tenant-*, not ' + object.metadata.name\"}]", ""),
			requests: []parityRequest{dry("apiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {tenant: 'yes'}}\n"), dry("apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-a, labels: {tenant: 'yes'}}\n"), dry("apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n")}},
		{name: "cluster-scoped-namespace-object-null", bundle: simple("cluster-scoped-namespace-object-null", "matchConstraints:\n  resourceRules: [{apiGroups: [scheduling.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [priorityclasses]}]\nvalidations: [{expression: 'namespaceObject == null && request.namespace == \"\"', message: cluster-scoped}]", ""),
			requests: []parityRequest{dry("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: mid}\nvalue: 100\n")}},
		{name: "update-object-selector-sees-old-labels", bundle: simple("update-object-selector-sees-old-labels", cmRules+"validations: [{expression: \"request.operation != 'UPDATE' || (has(object.metadata.labels) && 'locked' in object.metadata.labels)\", message: cannot unlock}]", "validationActions: [Deny]\nmatchResources: {objectSelector: {matchLabels: {locked: 'true'}}}"),
			requests: []parityRequest{req("create", cm("c", data("a", "1"), "locked", "true")), req("update", cm("c", data("a", "2"))), req("update", cm("c", data("a", "3"), "locked", "true"))}},
		{name: "message-expression-over-5kib-falls-back", bundle: simple("message-expression-over-5kib-falls-back", cmRules+"validations: [{expression: 'false', message: static, messageExpression: 'string(object.data.long)'}]", ""),
			requests: []parityRequest{dry(cm("long", data("long", strings.Repeat("x", 5121)))), dry(cm("fits", data("long", strings.Repeat("y", 300))))}},
		{name: "variables-count-against-the-budget", bundle: simple("variables-count-against-the-budget", cmRules+"variables: [{name: pairs, expression: 'object.data.map(a, object.data.map(b, a + b)).size()'}]\nvalidations:\n"+strings.Repeat("- expression: 'variables.pairs >= 0'\n", 3), ""),
			requests: []parityRequest{dry(cm("small", bigData(10))), dry(cm("large", bigData(600)))}},

		// --- typed objects: kube-apiserver reads a built-in kind through its
		// Go type, a custom resource as unstructured (core/celeval/internal/objectval/typedval.go)
		{name: "typed-double-index", bundle: simple("typed-double-index", deployRules+"validations: [{expression: \"object.spec.template.spec.containers[0.0].name == 'app'\"}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "typed-struct-never-zero", bundle: simple("typed-struct-never-zero", deployRules+"validations: [{expression: '!optional.ofNonZeroValue(object.spec.template.spec.containers[0].resources).hasValue()', message: resources is set}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "typed-int-key", bundle: simple("typed-int-key", deployRules+"validations: [{expression: 'object.spec[1] == 1'}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "typed-in-int-key", bundle: simple("typed-in-int-key", deployRules+"validations: [{expression: '!(1 in object.spec)', message: in}]", ""),
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},
		{name: "untyped-custom-resource-int-key", bundle: simple("untyped-custom-resource-int-key", "matchConstraints:\n  resourceRules: [{apiGroups: [rules.admitfn.io], apiVersions: [v1], operations: [CREATE], resources: [limits]}]\nvalidations: [{expression: 'object[1] == 1'}]", ""),
			requests: []parityRequest{dry(limit("l", 1))}},
		// A built-in paramKind used once in the suite (kubernetes/kubernetes#130887, above).
		// The validating dispatcher reads its params unstructured (the
		// mutating one does not: mutating_test.go).
		{name: "params-of-built-in-kind-unstructured", bundle: simple("params-of-built-in-kind-unstructured", "paramKind: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass}\n"+deployRules+"validations: [{expression: \"params.metadata.labels[1] == 'x'\"}]",
			"validationActions: [Deny]\nparamRef: {name: typed-params, parameterNotFoundAction: Deny}") + "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: typed-params, labels: {tier: low}}\nvalue: 10\n",
			requests: []parityRequest{dry(deploy("d", 1, "nginx"))}},

		// --- deliberate divergences
		{name: "namespace-object-name", bundle: simple("namespace-object-name", cmRules+"validations: [{expression: \"namespaceObject.metadata.name == object.metadata.namespace\", message: namespace}]", ""),
			requests: []parityRequest{dry(cm("c", nil))}},
		{name: "namespace-object-labels", labels: map[string]string{"env": "prod"}, bundle: simple("namespace-object-labels", cmRules+"validations: [{expression: \"namespaceObject.metadata.labels['env'] != 'prod'\", message: not in prod}]", ""),
			requests: []parityRequest{dry(cm("c", nil))},
			diverge:  "the function cannot read namespace labels",
			admitfn:  "ValidatingAdmissionPolicy 'namespace-object-labels.parity.admitfn.io' with binding 'namespace-object-labels' denied request: expression 'namespaceObject.metadata.labels['env'] != 'prod'' resulted in error: no such key: labels"},
		{name: "authorizer", bundle: simple("authorizer", cmRules+"validations: [{expression: \"authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('list').allowed()\", message: needs list on secrets}]", ""),
			requests: []parityRequest{dry(cm("c", nil))},
			diverge:  "the function has no authorizer",
			admitfn:  "ValidatingAdmissionPolicy 'authorizer.parity.admitfn.io' with binding 'authorizer' denied request: expression 'authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('list').allowed()' resulted in error: no such attribute(s): authorizer"},
	}
}

func TestParity(t *testing.T) {
	installLimitCRD(t)
	cases := parityCases()
	if len(cases) < 60 {
		t.Errorf("%d parity cases; the suite promises at least 60", len(cases))
	}
	runParity(t, cases)
}

// What kube-apiserver refuses to store, admitfn refuses to load: the same
// YAML is created natively (it must fail) and loaded by `admitfn render`
// (it must fail too). A valid bundle is the control.
func TestRejectsWhatKubeAPIServerRejects(t *testing.T) {
	const validPolicy = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: valid.reject.admitfn.io}\nspec:\n" +
		"  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}\n  validations: [{expression: 'true'}]\n"
	withBinding := func(spec string) string {
		return validPolicy + bindingDoc("binding.reject.admitfn.io", "valid.reject.admitfn.io", spec)
	}
	reject := func(spec string) string { return policyDoc("bad.reject.admitfn.io", spec) }
	for _, tc := range []struct {
		name   string
		bundle string
		valid  bool
	}{
		{name: "control", bundle: withBinding("validationActions: [Deny]"), valid: true},
		{name: "syntax error", bundle: reject(cmRules + "validations: [{expression: 'object.data +'}]")},
		{name: "undeclared reference", bundle: reject(cmRules + "validations: [{expression: 'base64.encode(b\"x\") == \"\"'}]")},
		{name: "non-bool validation", bundle: reject(cmRules + "validations: [{expression: 'object.metadata.name'}]")},
		{name: "dyn messageExpression", bundle: reject(cmRules + "validations: [{expression: 'true', messageExpression: 'object.metadata.name'}]")},
		{name: "int auditAnnotation", bundle: reject(cmRules + "auditAnnotations: [{key: k, valueExpression: '1'}]")},
		{name: "reason Unauthorized", bundle: reject(cmRules + "validations: [{expression: 'true', reason: Unauthorized}]")},
		{name: "message with a line break", bundle: reject(cmRules + "validations: [{expression: 'true', message: \"a\\nb\"}]")},
		{name: "no validations or auditAnnotations", bundle: reject(cmRules)},
		{name: "no resourceRules", bundle: reject("matchConstraints: {}\nvalidations: [{expression: 'true'}]")},
		{name: "unknown operation", bundle: reject("matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [PATCH], resources: [configmaps]}]}\nvalidations: [{expression: 'true'}]")},
		{name: "bad failurePolicy", bundle: reject("failurePolicy: Sometimes\n" + cmRules + "validations: [{expression: 'true'}]")},
		{name: "bad variable name", bundle: reject(cmRules + "variables: [{name: 'in', expression: '1'}]\nvalidations: [{expression: 'true'}]")},
		{name: "variable used before definition", bundle: reject(cmRules + "variables: [{name: a, expression: 'variables.b'}, {name: b, expression: '1'}]\nvalidations: [{expression: 'true'}]")},
		{name: "duplicate matchCondition names", bundle: reject(cmRules + "matchConditions: [{name: a, expression: 'true'}, {name: a, expression: 'true'}]\nvalidations: [{expression: 'true'}]")},
		{name: "non-bool matchCondition", bundle: reject(cmRules + "matchConditions: [{name: a, expression: '1'}]\nvalidations: [{expression: 'true'}]")},
		{name: "duplicate audit keys", bundle: reject(cmRules + "auditAnnotations: [{key: k, valueExpression: \"'a'\"}, {key: k, valueExpression: \"'b'\"}]")},
		{name: "Deny and Warn together", bundle: withBinding("validationActions: [Deny, Warn]")},
		{name: "no validationActions", bundle: withBinding("validationActions: []")},
		{name: "paramRef name and selector", bundle: withBinding("validationActions: [Deny]\nparamRef: {name: a, selector: {}, parameterNotFoundAction: Deny}")},
		{name: "paramRef without parameterNotFoundAction", bundle: withBinding("validationActions: [Deny]\nparamRef: {name: a}")},
		{name: "invalid label selector", bundle: withBinding("validationActions: [Deny]\nmatchResources: {objectSelector: {matchExpressions: [{key: a, operator: In}]}}")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newParityRunner(t)
			var nativeErr error
			var created []func()
			for _, u := range r.decode(tc.bundle, "default") {
				ri, _ := r.resource(u)
				if _, err := ri.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
					nativeErr = err
					continue
				}
				name := u.GetName()
				created = append(created, func() { ri.Delete(context.Background(), name, metav1.DeleteOptions{}) })
			}
			for _, del := range created {
				del()
			}
			dir := writeBundle(t, map[string]string{"bundle.yaml": tc.bundle})
			out, renderErr := exec.Command(kube.cliBin, "render", "-p", dir, "--url", "https://127.0.0.1:1").CombinedOutput()
			switch {
			case tc.valid && (nativeErr != nil || renderErr != nil):
				t.Errorf("valid bundle refused: native %v; admitfn %v: %s", nativeErr, renderErr, out)
			case !tc.valid && nativeErr == nil:
				t.Errorf("kube-apiserver accepted it; the case is wrong")
			case !tc.valid && renderErr == nil:
				t.Errorf("admitfn accepted a bundle kube-apiserver refuses: %v", nativeErr)
			default:
				t.Logf("native: %v\nadmitfn: %s", nativeErr, out)
			}
		})
	}
}

// installLimitCRD creates the CRD of the Limit param kind and waits until it
// is served.
func installLimitCRD(t *testing.T) { installLimitCRDOn(t, kube.config) }

// installLimitCRDOn installs it in the kube-apiserver config reaches.
func installLimitCRDOn(t *testing.T, config *rest.Config) {
	t.Helper()
	installCRDOn(t, config, "rules.admitfn.io", "limits", "Limit")
}

// installCRDOn creates a namespaced kind with an integer max, and waits
// until discovery serves it.
func installCRDOn(t *testing.T, config *rest.Config, group, plural, kind string) {
	t.Helper()
	r := newParityRunnerOn(t, config)
	crd := r.decode(fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: %[2]s, singular: %[3]s, kind: %[4]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          max: {type: integer}
`, group, plural, strings.ToLower(kind), kind), "")[0]
	ri, _ := r.resource(crd)
	if _, err := ri.Create(context.Background(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	err := waitFor(func() error {
		_, err := newParityRunnerOn(t, config).mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}, "v1")
		return err
	})
	if err != nil {
		t.Fatalf("CRD %s not served: %v", kind, err)
	}
}
