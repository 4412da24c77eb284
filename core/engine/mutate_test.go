package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wI2L/jsondiff"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

func pod(name string, containers ...map[string]any) map[string]any {
	var cs []any
	for _, c := range containers {
		cs = append(cs, c)
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"containers": cs},
	}
}

func container(name, image string, extra ...any) map[string]any {
	c := map[string]any{"name": name, "image": image}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func request(t *testing.T, o reqOpts) *review.Request {
	t.Helper()
	r, err := review.Decode(admissionReview(t, o))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func podRequest(t *testing.T, p map[string]any) *review.Request {
	return request(t, reqOpts{operation: "CREATE", version: "v1", resource: "pods", kind: "Pod", name: p["metadata"].(map[string]any)["name"].(string), namespace: "default", object: p})
}

func configMapRequest(t *testing.T, op string, cm map[string]any) *review.Request {
	return request(t, reqOpts{operation: op, version: "v1", resource: "configmaps", kind: "ConfigMap", name: cm["metadata"].(map[string]any)["name"].(string), namespace: "default", object: cm})
}

// mutateRoute is the only mutating route of e serving policy, failing the
// test if there is none.
func mutateRoute(t *testing.T, e *Engine, policyName string) policy.Route {
	t.Helper()
	for _, g := range e.Groups() {
		for _, b := range g.MutatingBindings {
			if b.Spec.PolicyName == policyName {
				return g.Route()
			}
		}
	}
	t.Fatalf("no mutating group serves policy %q", policyName)
	return policy.Route{}
}

func mustReview(t *testing.T, e *Engine, rt policy.Route, req *review.Request) *admissionv1.AdmissionResponse {
	t.Helper()
	res, err := e.Review(context.Background(), rt, req)
	if err != nil {
		t.Fatalf("review: %v", err)
	}
	return res.Response
}

// expectPatch checks the response allows with exactly want (JSON), or with
// no patch at all when want is "".
func expectPatch(t *testing.T, resp *admissionv1.AdmissionResponse, want string) {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	if want == "" {
		if resp.Patch != nil || resp.PatchType != nil {
			t.Fatalf("patch = %s, want none", resp.Patch)
		}
		return
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patchType = %v, want JSONPatch", resp.PatchType)
	}
	if !jsonEqual(t, resp.Patch, []byte(want)) {
		t.Fatalf("patch:\n got %s\nwant %s", resp.Patch, want)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

func TestMutateSetLabel(t *testing.T) {
	e := loadExamples(t, "08-mutate-label.yaml")
	rt := mutateRoute(t, e, "managed-label.example.com")
	if g := e.Groups()[0]; g.Route() != rt || !g.Default {
		t.Fatalf("route = %+v, want the default group's", rt)
	}
	// The bare prefix serves the default group too.
	expectPatch(t, mustReview(t, e, policy.Route{Type: policy.Mutating}, deploymentRequest(t, "CREATE", deployment("web", "default", 1, nil))),
		`[{"op":"add","path":"/metadata/labels","value":{"admitfn.io/managed":"true"}}]`)
	expectPatch(t, mustReview(t, e, rt, deploymentRequest(t, "CREATE", deployment("web", "default", 1, map[string]any{"app": "web"}))),
		`[{"op":"add","path":"/metadata/labels/admitfn.io~1managed","value":"true"}]`)
	expectPatch(t, mustReview(t, e, rt, deploymentRequest(t, "CREATE", deployment("web", "default", 1, nil))),
		`[{"op":"add","path":"/metadata/labels","value":{"admitfn.io/managed":"true"}}]`)
	// Already labelled: nothing to do, no patch.
	expectPatch(t, mustReview(t, e, rt, deploymentRequest(t, "UPDATE", deployment("web", "default", 1, map[string]any{"admitfn.io/managed": "true"}))), "")
	// A different value is replaced.
	expectPatch(t, mustReview(t, e, rt, deploymentRequest(t, "UPDATE", deployment("web", "default", 1, map[string]any{"admitfn.io/managed": "no"}))),
		`[{"op":"replace","path":"/metadata/labels/admitfn.io~1managed","value":"true"}]`)
	// DELETE is never mutated (kube-apiserver's plugin ignores it too).
	del := request(t, reqOpts{operation: "DELETE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "default",
		oldObject: deployment("web", "default", 1, nil)})
	expectPatch(t, mustReview(t, e, rt, del), "")
	// A resource no policy of the route matches: allowed as it is.
	expectPatch(t, mustReview(t, e, rt, configMapRequest(t, "CREATE", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings"}})), "")
}

func TestMutateSidecarOnlyIfMissing(t *testing.T) {
	e := loadExamples(t, "09-mutate-sidecar.yaml")
	rt := mutateRoute(t, e, "sidecar-policy.example.com")
	if rt.Group == "" {
		t.Fatal("an IfNeeded policy must not share the default (Never) route")
	}
	p := pod("web", container("app", "nginx:1.27"))
	p["spec"].(map[string]any)["initContainers"] = []any{container("init", "busybox")}
	expectPatch(t, mustReview(t, e, rt, podRequest(t, p)),
		`[{"op":"add","path":"/spec/initContainers/-","value":{"name":"mesh-proxy","image":"mesh/proxy:v1.0.0","restartPolicy":"Always"}}]`)
	expectPatch(t, mustReview(t, e, rt, podRequest(t, pod("bare", container("app", "nginx:1.27")))),
		`[{"op":"add","path":"/spec/initContainers","value":[{"name":"mesh-proxy","image":"mesh/proxy:v1.0.0","restartPolicy":"Always"}]}]`)
	// Already there (even with another image): the matchCondition skips it.
	has := pod("meshed", container("app", "nginx:1.27"))
	has["spec"].(map[string]any)["initContainers"] = []any{container("mesh-proxy", "mesh/proxy:v0.9.0")}
	expectPatch(t, mustReview(t, e, rt, podRequest(t, has)), "")
}

func TestMutateEveryContainer(t *testing.T) {
	e := loadExamples(t, "10-mutate-pull-policy.yaml")
	rt := mutateRoute(t, e, "always-pull-images.example.com")
	p := pod("web",
		container("app", "nginx:1.27", "imagePullPolicy", "IfNotPresent"),
		container("log", "fluent-bit:3", "imagePullPolicy", "Always"),
		container("proxy", "envoy:1.30"))
	expectPatch(t, mustReview(t, e, rt, podRequest(t, p)),
		`[{"op":"replace","path":"/spec/containers/0/imagePullPolicy","value":"Always"},{"op":"add","path":"/spec/containers/2/imagePullPolicy","value":"Always"}]`)
}

func TestMutateJSONPatchEscapedKeys(t *testing.T) {
	e := loadExamples(t, "11-mutate-jsonpatch.yaml")
	rt := mutateRoute(t, e, "configmap-hygiene.example.com")
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "settings", "namespace": "default",
		"labels":      map[string]any{"tier": "gold", "app": "web"},
		"annotations": map[string]any{"example.com/debug": "true", "keep": "me"},
	}}
	expectPatch(t, mustReview(t, e, rt, configMapRequest(t, "CREATE", cm)),
		`[{"op":"add","path":"/metadata/annotations/admitfn.io~1owner","value":"alice"},{"op":"remove","path":"/metadata/annotations/example.com~1debug"},{"op":"replace","path":"/metadata/labels/tier","value":"standard"}]`)
	bare := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "bare", "namespace": "default"}}
	expectPatch(t, mustReview(t, e, rt, configMapRequest(t, "CREATE", bare)),
		`[{"op":"add","path":"/metadata/annotations","value":{"admitfn.io/owner":"alice"}}]`)
}

func TestMutateParams(t *testing.T) {
	e := loadExamples(t, "12-mutate-params.yaml")
	rt := mutateRoute(t, e, "default-team.example.com")
	expectPatch(t, mustReview(t, e, rt, deploymentRequest(t, "CREATE", deployment("web", "default", 1, map[string]any{"app": "web"}))),
		`[{"op":"add","path":"/metadata/labels/team","value":"platform"}]`)
	expectPatch(t, mustReview(t, e, rt, deploymentRequest(t, "CREATE", deployment("web", "default", 1, map[string]any{"team": "payments"}))), "")

	// No such param, parameterNotFoundAction Allow: no mutation; Deny: the
	// request is denied, as kube-apiserver does.
	for action, want := range map[string]string{"Allow": "", "Deny": "policy 'default-team.example.com' with binding 'default-team' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"} {
		src := readExample(t, "12-mutate-params.yaml")
		src = strings.Replace(src, "name: admitfn-defaults\n    namespace: default\n    parameterNotFoundAction: Allow", "name: missing\n    namespace: default\n    parameterNotFoundAction: "+action, 1)
		e := mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(src)})
		resp := mustReview(t, e, rt, deploymentRequest(t, "CREATE", deployment("web", "default", 1, nil)))
		if want == "" {
			expectPatch(t, resp, "")
			continue
		}
		expectDenied(t, resp, 403, "Forbidden", want)
	}
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func expectDenied(t *testing.T, resp *admissionv1.AdmissionResponse, code int32, reason, message string) {
	t.Helper()
	if resp.Allowed || resp.Result == nil {
		t.Fatalf("allowed (patch %s), want denied with %q", resp.Patch, message)
	}
	if resp.Patch != nil {
		t.Errorf("denial carries a patch: %s", resp.Patch)
	}
	if resp.Result.Code != code || string(resp.Result.Reason) != reason || resp.Result.Message != message {
		t.Fatalf("denied with %d %s %q\nwant %d %s %q", resp.Result.Code, resp.Result.Reason, resp.Result.Message, code, reason, message)
	}
}

// mapPolicy is a MutatingAdmissionPolicy on ConfigMaps with one binding.
func mapPolicy(name, failurePolicy, mutations string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}]
  failurePolicy: ` + failurePolicy + `
  reinvocationPolicy: Never
  mutations:
` + mutations + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: ` + name + `-binding}
spec: {policyName: ` + name + `}
`
}

func applyConfig(expr string) string {
	return "  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: '" + expr + "'\n"
}

func jsonPatchOf(expr string) string {
	return "  - patchType: JSONPatch\n    jsonPatch:\n      expression: '" + expr + "'\n"
}

func simpleCM(labels map[string]any) map[string]any {
	meta := map[string]any{"name": "cm", "namespace": "default"}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]any{"k": "v"}}
}

func TestMutatePoliciesApplyInBundleOrder(t *testing.T) {
	// The second policy sees the label the first one set.
	e := mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(
		mapPolicy("first", "Fail", applyConfig(`Object{metadata: Object.metadata{labels: {"stage": "one"}}}`)) + "---\n" +
			mapPolicy("second", "Fail", applyConfig(`Object{data: {"seen": object.metadata.labels["stage"]}}`)))})
	expectPatch(t, mustReview(t, e, policy.Route{Type: policy.Mutating}, configMapRequest(t, "CREATE", simpleCM(nil))),
		`[{"op":"add","path":"/data/seen","value":"one"},{"op":"add","path":"/metadata/labels","value":{"stage":"one"}}]`)
}

func TestMutateFailures(t *testing.T) {
	for _, tc := range []struct {
		name, bundle string
		// want is a patch (allowed) or, with deny, the denial message.
		want   string
		deny   bool
		code   int32
		reason string
		failed []string
	}{{
		name:   "runtime error, failurePolicy Fail",
		bundle: mapPolicy("broken", "Fail", applyConfig(`Object{data: {"x": object.data["missing"]}}`)),
		deny:   true, code: 403, reason: "Invalid",
		want:   "policy 'broken' with binding 'broken-binding' denied request: expression 'Object{data: {\"x\": object.data[\"missing\"]}}' resulted in error: no such key: missing",
		failed: []string{"broken"},
	}, {
		name: "runtime error, failurePolicy Ignore: the other policies still apply",
		bundle: mapPolicy("broken", "Ignore", applyConfig(`Object{data: {"x": object.data["missing"]}}`)) + "---\n" +
			mapPolicy("fine", "Ignore", applyConfig(`Object{data: {"ok": "yes"}}`)),
		want:   `[{"op":"add","path":"/data/ok","value":"yes"}]`,
		failed: []string{"broken"},
	}, {
		name: "Ignore keeps the mutations that succeeded before the error",
		bundle: mapPolicy("half", "Ignore", applyConfig(`Object{data: {"first": "done"}}`)+
			applyConfig(`Object{data: {"x": object.data["missing"]}}`)),
		want:   `[{"op":"add","path":"/data/first","value":"done"}]`,
		failed: []string{"half"},
	}, {
		name:   "authorizer is not available",
		bundle: mapPolicy("authz", "Fail", applyConfig(`Object{data: {"x": string(authorizer.group("").resource("pods").check("get").allowed())}}`)),
		deny:   true, code: 403, reason: "Invalid",
		want:   "policy 'authz' with binding 'authz-binding' denied request: expression 'Object{data: {\"x\": string(authorizer.group(\"\").resource(\"pods\").check(\"get\").allowed())}}' resulted in error: no such attribute(s): authorizer",
		failed: []string{"authz"},
	}, {
		name:   "ApplyConfiguration on an atomic field",
		bundle: mapPolicy("atomic", "Fail", applyConfig(`Object{metadata: Object.metadata{ownerReferences: [Object.metadata.ownerReferences{name: "x"}]}}`)),
		deny:   true, code: 403, reason: "Invalid",
		want:   "policy 'atomic' with binding 'atomic-binding' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .metadata.ownerReferences[0]",
		failed: []string{"atomic"},
	}, {
		name:   "JSON Patch to a path that does not exist",
		bundle: mapPolicy("nopath", "Fail", jsonPatchOf(`[JSONPatch{op: "replace", path: "/spec/replicas", value: 3}]`)),
		deny:   true, code: 403, reason: "Invalid",
		want:   "policy 'nopath' with binding 'nopath-binding' denied request: JSON Patch: replace operation does not apply: doc is missing path: /spec/replicas: missing value",
		failed: []string{"nopath"},
	}, {
		name:   "JSON Patch adding a field the kind does not have is an internal error, whatever failurePolicy",
		bundle: mapPolicy("unknown", "Ignore", jsonPatchOf(`[JSONPatch{op: "add", path: "/spec", value: {"replicas": 3}}]`)),
		deny:   true, code: 500, reason: "InternalError",
		want:   `Internal error occurred: strict decoding error: unknown field "spec"`,
		failed: []string{"unknown"},
	}, {
		name:   "JSON Patch giving a field a value of the wrong type is an internal error, whatever failurePolicy",
		bundle: mapPolicy("wrongtype", "Ignore", jsonPatchOf(`[JSONPatch{op: "add", path: "/immutable", value: "yes"}]`)),
		deny:   true, code: 500, reason: "InternalError",
		want:   `Internal error occurred: json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool`,
		failed: []string{"wrongtype"},
	}, {
		name:   "JSON Patch with a malformed value is an internal error",
		bundle: mapPolicy("badtime", "Fail", jsonPatchOf(`[JSONPatch{op: "add", path: "/metadata/creationTimestamp", value: "yesterday"}]`)),
		deny:   true, code: 500, reason: "InternalError",
		want:   `Internal error occurred: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`,
		failed: []string{"badtime"},
	}, {
		name:   "a failed JSON Patch test leaves the object alone",
		bundle: mapPolicy("guarded", "Fail", jsonPatchOf(`[JSONPatch{op: "test", path: "/data/k", value: "other"}, JSONPatch{op: "add", path: "/data/x", value: "y"}]`)),
		want:   "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(tc.bundle)})
			b, _ := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(tc.bundle)}})
			res, err := e.Review(context.Background(), mutateRoute(t, e, b.MutatingPolicies[0].Name), configMapRequest(t, "CREATE", simpleCM(nil)))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(res.FailedPolicies, ",") != strings.Join(tc.failed, ",") {
				t.Errorf("failed policies = %q, want %q", res.FailedPolicies, tc.failed)
			}
			if !tc.deny {
				expectPatch(t, res.Response, tc.want)
				return
			}
			expectDenied(t, res.Response, tc.code, tc.reason, tc.want)
		})
	}
}

// TestMutateIdempotent applies each documented example's patch and reviews
// the result again: kube-apiserver may reinvoke a mutating webhook, and a
// second pass must change nothing.
func TestMutateIdempotent(t *testing.T) {
	e := loadExamples(t, "08-mutate-label.yaml", "09-mutate-sidecar.yaml", "10-mutate-pull-policy.yaml", "11-mutate-jsonpatch.yaml", "12-mutate-params.yaml")
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "settings", "namespace": "default", "labels": map[string]any{"tier": "gold"}, "annotations": map[string]any{"example.com/debug": "1"}}}
	p := pod("web", container("app", "nginx:1.27"), container("log", "fluent-bit:3", "imagePullPolicy", "IfNotPresent"))
	for _, tc := range []struct {
		name string
		req  func(obj map[string]any) *review.Request
		obj  map[string]any
	}{
		{"deployment", func(o map[string]any) *review.Request { return deploymentRequest(t, "CREATE", o) }, deployment("web", "default", 2, map[string]any{"app": "web"})},
		{"pod", func(o map[string]any) *review.Request { return podRequest(t, o) }, p},
		{"configmap", func(o map[string]any) *review.Request { return configMapRequest(t, "CREATE", o) }, cm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.obj
			patched := 0
			for _, g := range e.Groups() {
				if g.Type != policy.Mutating {
					continue
				}
				resp := mustReview(t, e, g.Route(), tc.req(obj))
				if resp.Patch == nil {
					continue
				}
				patched++
				obj = applyPatch(t, obj, resp.Patch)
				if again := mustReview(t, e, g.Route(), tc.req(obj)); again.Patch != nil {
					t.Errorf("%s: second pass patched again: %s", g.Path(), again.Patch)
				}
			}
			if patched == 0 {
				t.Fatal("no route patched the object: the test proves nothing")
			}
		})
	}
}

func applyPatch(t *testing.T, obj map[string]any, patch []byte) map[string]any {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("decode patch %s: %v", patch, err)
	}
	doc, _ := json.Marshal(obj)
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("apply patch %s: %v", patch, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A kind without a built-in schema (a custom resource) is merged with a
// deduced schema: maps merge key by key, a list is replaced as a whole,
// JSONPatch works on anything.
func TestMutateCustomResource(t *testing.T) {
	policyFor := func(name, mutation string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]
  reinvocationPolicy: Never
  mutations:
` + mutation + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec: {policyName: ` + name + `}
`
	}
	widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec": map[string]any{"size": int64(1), "tags": []any{"a"}}}
	req := func() *review.Request {
		return request(t, reqOpts{operation: "CREATE", group: "example.com", version: "v1", resource: "widgets", kind: "Widget", name: "w", namespace: "default", object: widget})
	}
	rt := policy.Route{Type: policy.Mutating}

	e := mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(policyFor("merge", applyConfig(`Object{spec: Object.spec{color: "red"}}`)))})
	expectPatch(t, mustReview(t, e, rt, req()), `[{"op":"add","path":"/spec/color","value":"red"}]`)

	e = mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(policyFor("list", applyConfig(`Object{spec: Object.spec{tags: ["b"]}}`)))})
	expectPatch(t, mustReview(t, e, rt, req()), `[{"op":"replace","path":"/spec/tags/0","value":"b"}]`)

	e = mustEngine(t, policy.Source{Name: "p.yaml", Data: []byte(policyFor("patch", jsonPatchOf(`[JSONPatch{op: "add", path: "/spec/tags/-", value: "b"}, JSONPatch{op: "add", path: "/spec/anything", value: 2}]`)))})
	expectPatch(t, mustReview(t, e, rt, req()), `[{"op":"add","path":"/spec/anything","value":2},{"op":"add","path":"/spec/tags/-","value":"b"}]`)
}

func TestMutatingBundleErrors(t *testing.T) {
	for _, tc := range []struct {
		name, bundle string
		want         []string
	}{{
		name:   "CEL that does not compile, or returns the wrong type",
		bundle: mapPolicy("bad", "Fail", applyConfig(`Object{data: {"x": object.nope(}}`)+jsonPatchOf(`Object{}`)),
		want: []string{
			"p.yaml: policy bad: spec.mutations[0].applyConfiguration.expression: compilation failed: ERROR: <input>:1:32: Syntax error: mismatched input '}'",
			"p.yaml: policy bad: spec.mutations[1].jsonPatch.expression: must evaluate to list(JSONPatch) but got Object",
		},
	}, {
		name: "static validation as kube-apiserver's",
		bundle: strings.NewReplacer("operations: [CREATE, UPDATE]", "operations: [CREATE, DELETE]", "  reinvocationPolicy: Never\n", "").
			Replace(mapPolicy("static", "Fail", "  - patchType: Merge\n")),
		want: []string{
			`p.yaml: policy static: spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`,
			`p.yaml: policy static: spec.mutations[0].patchType: Unsupported value: "Merge": supported values: "ApplyConfiguration", "JSONPatch"`,
			`p.yaml: policy static: spec.reinvocationPolicy: Required value`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(tc.bundle)}})
			if err == nil {
				_, err = New(b, compiler)
			}
			var errs policy.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v, want policy.Errors", err)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(errs), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d:\n got %s\nwant prefix %s", i, errs[i], w)
				}
			}
		})
	}
}

// jsonTree gives jsondiff the same values as encoding/json's text decoded
// with UseNumber: the patch is the one marshalling both objects and diffing
// the documents gives, byte for byte.
func TestPatchFromTreesIsThePatchFromDocuments(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web", "a/b": "c~d"}, "generation": int64(3)},
			"spec": map[string]any{
				"containers": []any{
					map[string]any{"name": "app", "image": "app:1", "resources": map[string]any{"limits": map[string]any{"cpu": "500m"}}},
				},
				"priority":                      int64(9007199254740993), // beyond float64's exact integers
				"terminationGracePeriodSeconds": int64(30),
				"overhead":                      float64(0.000001),
				"weight":                        float64(1e21),
				"ratio":                         float64(1.5),
				"enableServiceLinks":            true,
				"nodeName":                      nil,
			},
		}
	}
	for _, c := range []struct {
		name   string
		change func(o map[string]any)
	}{
		{"nothing", func(map[string]any) {}},
		{"an integer", func(o map[string]any) { o["spec"].(map[string]any)["priority"] = int64(9007199254740995) }},
		{"an int from a patcher", func(o map[string]any) { o["spec"].(map[string]any)["terminationGracePeriodSeconds"] = 60 }},
		{"floats", func(o map[string]any) {
			o["spec"].(map[string]any)["overhead"] = float64(0.0000001)
			o["spec"].(map[string]any)["weight"] = float64(2e21)
			o["spec"].(map[string]any)["ratio"] = float64(100)
		}},
		{"a float to an integer", func(o map[string]any) { o["spec"].(map[string]any)["ratio"] = int64(2) }},
		{"an escaped key", func(o map[string]any) {
			o["metadata"].(map[string]any)["labels"].(map[string]any)["a/b"] = "e~f"
			o["metadata"].(map[string]any)["labels"].(map[string]any)["x~y/z"] = "new"
		}},
		{"a container added and one changed", func(o map[string]any) {
			cs := o["spec"].(map[string]any)["containers"].([]any)
			cs[0].(map[string]any)["imagePullPolicy"] = "Always"
			o["spec"].(map[string]any)["containers"] = append(cs, map[string]any{"name": "proxy", "image": "envoy:1", "ports": []any{map[string]any{"containerPort": int64(15001)}}})
		}},
		{"removed and null", func(o map[string]any) {
			delete(o["metadata"].(map[string]any), "labels")
			o["spec"].(map[string]any)["nodeName"] = "node-1"
			o["spec"].(map[string]any)["enableServiceLinks"] = nil
		}},
		{"a json.Number kept", func(o map[string]any) { o["spec"].(map[string]any)["ratio"] = json.Number("1.50") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, after := base(), base()
			c.change(after)

			ob, _ := json.Marshal(before)
			pb, _ := json.Marshal(after)
			wantOps, err := jsondiff.CompareJSON(ob, pb, jsondiff.UnmarshalFunc(func(data []byte, v any) error {
				d := json.NewDecoder(strings.NewReader(string(data)))
				d.UseNumber()
				return d.Decode(v)
			}))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(wantOps)

			src, err := jsonTree(before)
			if err != nil {
				t.Fatal(err)
			}
			tgt, err := jsonTree(after)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := jsondiff.CompareWithoutMarshal(src, tgt)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(ops)
			if string(got) != string(want) {
				t.Errorf("patch\n got %s\nwant %s", got, want)
			}
			if c.name != "nothing" && len(ops) == 0 {
				t.Error("no operations for a change")
			}
		})
	}
}

// Types an unstructured object should not hold still copy exactly, through
// encoding/json.
func TestJSONTreeOtherTypes(t *testing.T) {
	got, err := jsonTree(map[string]any{"a": int8(-3), "b": uint64(18446744073709551615), "c": []string{"x"}, "d": float32(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": json.Number("-3"), "b": json.Number("18446744073709551615"), "c": []any{"x"}, "d": json.Number("0.5")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jsonTree = %#v, want %#v", got, want)
	}
	if _, err := jsonTree(map[string]any{"f": func() {}}); err == nil {
		t.Error("a func copied without error")
	}
}
