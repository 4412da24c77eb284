package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/render"
)

// outcome is what kube-apiserver's matchConditions matcher makes of one
// condition.
type outcome int

const (
	isFalse outcome = iota
	isTrue
	fails
)

func (o outcome) String() string { return [...]string{"false", "true", "fails"}[o] }

var conditionCompiler = plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))

// evaluate is kube-apiserver's matcher on expr as a webhook's only
// condition, for op on obj and old, as the webhook dispatcher gives them
// (a built-in kind as its Go type, a custom resource unstructured).
func evaluate(t *testing.T, expr string, op admission.Operation, obj, old runtime.Object, sub string, groups []string) outcome {
	t.Helper()
	return evaluateAs(t, expr, input{op: op, obj: obj, old: old, sub: sub, groups: groups})
}

// evaluateAs is evaluate for in, of in.kind (a ConfigMap when unset).
func evaluateAs(t *testing.T, expr string, in input) outcome {
	t.Helper()
	op, obj, old, sub, groups := in.op, in.obj, in.old, in.sub, in.groups
	fp := admissionregistrationv1.Fail
	hook := webhook.NewValidatingWebhookAccessor("w", "c", &admissionregistrationv1.ValidatingWebhook{
		Name: "w.admitfn.io", FailurePolicy: &fp, MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "c", Expression: expr}},
	})
	gvk, resource := in.kind, in.resource
	if gvk.Kind == "" {
		gvk, resource = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps"
	}
	attr := admission.NewAttributesRecord(obj, old, gvk, "team-a", "app", gvk.GroupVersion().WithResource(resource), sub, op, nil, false,
		&user.DefaultInfo{Name: "alice", Groups: groups})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}
	res := hook.GetCompiledMatcher(conditionCompiler).Match(context.Background(), va, nil, nil)
	switch {
	case res.Error != nil:
		return fails
	case res.Matches:
		return isTrue
	}
	return isFalse
}

// inputs are writes a guard must cover: each object typed and
// unstructured, created, updated and deleted, and a CONNECT.
type input struct {
	name     string
	op       admission.Operation
	obj, old runtime.Object
	sub      string
	groups   []string
	kind     schema.GroupVersionKind
	resource string
}

func inputs(t *testing.T) []input {
	objs := map[string]*corev1.ConfigMap{
		"bare":     {ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		"labelled": {ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"tier": "web", "team": "a"}}},
		"other":    {ObjectMeta: metav1.ObjectMeta{Name: "abc", Labels: map[string]string{"x": "y"}, Annotations: map[string]string{}}},
		"owned": {ObjectMeta: metav1.ObjectMeta{Name: "a-much-longer-name", Finalizers: []string{"f"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}}}, Data: map[string]string{"k": "v"}},
	}
	var out []input
	for name, o := range objs {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: raw}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		for _, form := range []struct {
			name string
			obj  runtime.Object
		}{{"typed", o}, {"unstructured", u}} {
			n := name + " " + form.name
			out = append(out,
				input{name: "create " + n, op: admission.Create, obj: form.obj, groups: []string{"system:authenticated"}},
				input{name: "update " + n, op: admission.Update, obj: form.obj, old: form.obj},
				input{name: "delete " + n, op: admission.Delete, old: form.obj, groups: []string{"system:masters"}})
		}
	}
	return append(out, input{name: "connect", op: admission.Connect, obj: &corev1.PodExecOptions{Command: []string{"sh"}}, sub: "exec"})
}

// Every guard Guard gives covers every way its condition fails: G || (c)
// never fails, is true wherever c is true or fails, and is false only
// where c is false.
func TestGuardedConditionsNeverFail(t *testing.T) {
	for _, expr := range []string{
		"object.metadata.labels.team == 'a'",
		"object.metadata.labels['tier'] == 'web'",
		"has(object.metadata.labels) && object.metadata.labels['tier'] == 'web'",
		"has(object.metadata.labels) ? object.metadata.labels['tier'] == 'web' : false",
		"object.metadata.labels['tier'] == 'web' || object.metadata.labels['team'] == 'a'",
		"'tier' in object.metadata.labels",
		"!('tier' in object.metadata.labels) || object.metadata.labels.tier != 'db'",
		"object.metadata.name.startsWith('a') && object.metadata.name.matches('^a-[a-z-]+$')",
		"size(object.metadata.name) > 5",
		"object.metadata.annotations.size() == 0",
		"object.metadata.finalizers[0] == 'f'",
		"object.metadata.ownerReferences.exists(o, o.kind == 'ReplicaSet')",
		"object.metadata.ownerReferences.all(o, o.controller)",
		"oldObject.metadata.name == object.metadata.name",
		"oldObject == null || oldObject.metadata.labels.team == 'a'",
		"object.metadata.name + '-x' == 'app-x'",
		"object.metadata.namespace == 'team-a'",
		"object.metadata.labels.exists(k, object.metadata.labels[k] == 'web')",
		"!request.userInfo.username.startsWith('system:')",
		"request.userInfo.groups.exists(g, g == 'system:masters')",
		"'system:masters' in request.userInfo.groups",
		"request.subResource == 'exec'",
		"request.dryRun",
		"request.operation == 'CREATE' && request.namespace == 'team-a'",
		"[object.metadata.name, object.metadata.namespace][1] == 'app'",
	} {
		t.Run(expr, func(t *testing.T) {
			g, err := celeval.Guard(expr)
			if err != nil {
				t.Fatalf("no guard: %v", err)
			}
			guarded := celeval.Guarded(expr, g)
			// Its cost is push-down's to bound; kube-apiserver must accept it.
			if _, err := celeval.CheckWebhookCondition(guarded); err != nil && !celeval.IsUnbounded(err) {
				t.Fatalf("kube-apiserver would refuse %s: %v", guarded, err)
			}
			failed := false
			for _, in := range inputs(t) {
				orig := evaluate(t, expr, in.op, in.obj, in.old, in.sub, in.groups)
				got := evaluate(t, guarded, in.op, in.obj, in.old, in.sub, in.groups)
				failed = failed || orig == fails
				want := orig
				if orig == fails {
					want = isTrue
				}
				if got != want {
					t.Errorf("%s: %s gives %s, want %s (the condition gives %s)", in.name, guarded, got, want, orig)
				}
			}
			if !failed && g != "false" {
				t.Logf("guard %s never needed on these inputs", g)
			}
		})
	}
}

// A condition Guard proves cannot fail is pushed as written.
func TestGuardOfWhatCannotFail(t *testing.T) {
	for _, expr := range []string{
		"request.operation == 'CREATE'",
		"request.resource.group == '' && request.kind.kind != 'Secret'",
		"request.userInfo.username == 'alice' || true",
	} {
		if g, err := celeval.Guard(expr); err != nil || g != "false" {
			t.Errorf("%s: guard %q, %v; want false", expr, g, err)
		}
	}
}

// Each way a condition can fail, under failurePolicy Fail: kube-apiserver
// never rejects the request itself; it calls the function, which denies
// in upstream's words, the condition guarded where a guard covers the
// failure and left to the function where none does.
func TestPushDownErrorSources(t *testing.T) {
	name := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		source, expr string
		obj          *corev1.ConfigMap
		guarded      bool   // pushed guarded; else not pushed, with why
		why, err     string // why it is not pushed; the error upstream reports
	}{
		{"missing field", "object.metadata.labels.team == 'a'", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			true, "", "no such key: labels"},
		{"missing key", "object.metadata.labels['tier'] == 'web'", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"a": "b"}}},
			true, "", "no such key: tier"},
		{"field of the kind", "object.data.missing == 'x'", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			true, "", "no such key: data"},
		{"field the kind lacks", "object.spec.replicas > 1", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			false, "reads object.spec, a field ConfigMap does not have", "no such key: spec"},
		{"wrong type", "object.metadata.name > 5", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			false, "compares object.metadata.name > 5, which fails on values of other types", "no such overload"},
		{"overflow", "size(object.metadata.name) * 9223372036854775807 > 0", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			false, "computes size(object.metadata.name) * 9223372036854775807, which can overflow or take operands of other types", "integer overflow"},
		{"division", "100 / (size(object.metadata.name) / 4) > 1", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			false, "computes size(object.metadata.name) / 4, which fails on a zero divisor", "division by zero"},
		{"string function", "object.metadata.name.substring(10) == 'x'", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			false, "calls substring in object.metadata.name.substring(10), which may fail to evaluate", "index out of range: 10"},
		{"cost", "object.metadata.labels.all(a, object.metadata.labels.all(b, object.metadata.labels.all(c, a + b + c != '')))",
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(3), Labels: map[string]string{"a": "b"}}},
			false, "", ""},
	} {
		t.Run(tc.source, func(t *testing.T) {
			doc := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - name: c
    expression: %q
  validations:
  - expression: "true"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: p}
spec:
  policyName: p
  validationActions: [Deny]
`, tc.expr)
			e, g, rep := pushDownOf(t, doc)
			br := rep.Bindings[0]
			switch {
			case tc.guarded:
				if len(br.Guarded) != 1 || len(rep.Conditions) != 1 || len(br.Kept) != 0 {
					t.Fatalf("want the condition guarded:\n%s", rep)
				}
			case tc.why != "":
				want := render.Kept{What: "matchCondition c", Why: "under failurePolicy Fail it could fail to evaluate, which kube-apiserver would answer in its own words: it " + tc.why}
				if len(rep.Conditions) != 0 || len(br.Kept) != 1 || br.Kept[0] != want {
					t.Fatalf("want it not pushed (%s):\n%s", want.Why, rep)
				}
			default:
				want := render.Kept{What: "matchCondition c", Why: "under failurePolicy Fail: its cost has no bound within kube-apiserver's per-call limit on every request, and past it kube-apiserver would reject the request in its own words"}
				if len(rep.Conditions) != 0 || len(br.Kept) != 1 || br.Kept[0] != want {
					t.Fatalf("want it not pushed for its cost:\n%s", rep)
				}
			}
			for _, c := range rep.Conditions {
				if got := evaluate(t, c.Expression, admission.Create, tc.obj, nil, "", nil); got != isTrue {
					t.Errorf("kube-apiserver: the pushed condition gives %s, want true (call the function)", got)
				}
			}
			if tc.err == "" {
				return
			}
			if got := evaluate(t, tc.expr, admission.Create, tc.obj, nil, "", nil); got != fails {
				t.Fatalf("the policy's condition gives %s here, want it to fail", got)
			}
			resp := reviewConfigMap(t, e, g, tc.obj)
			want := "ValidatingAdmissionPolicy 'p' with binding 'p' denied request: expression '" + tc.expr + "' resulted in error: " + tc.err
			if resp.Allowed || resp.Result.Code != 422 || resp.Result.Reason != metav1.StatusReasonInvalid || resp.Result.Message != want {
				t.Errorf("function: allowed %v, %d %s %q\nwant 422 Invalid %q", resp.Allowed, resp.Result.Code, resp.Result.Reason, resp.Result.Message, want)
			}
		})
	}
}

// reviewConfigMap is the function's answer to the create of cm in team-a.
func reviewConfigMap(t *testing.T, e *engine.Engine, g *policy.Group, cm *corev1.ConfigMap) *admissionv1.AdmissionResponse {
	t.Helper()
	cm = cm.DeepCopy()
	cm.APIVersion, cm.Kind, cm.Namespace = "v1", "ConfigMap", "team-a"
	raw, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Name: cm.Name, Namespace: "team-a",
			Operation: admissionv1.Create, UserInfo: authenticationv1.UserInfo{Username: "alice"}, Object: runtime.RawExtension{Raw: raw}}})
	if err != nil {
		t.Fatal(err)
	}
	return reviewOn(t, e, g, body).Response
}

// A guard for a kind the policy's rules name reads its fields as that
// kind's Go type says, and holds wherever the request carries another
// kind; a size guard holds wherever a list is longer than the condition's
// cost allows, so kube-apiserver never fails it on its cost.
func TestKindAndSizeGuardsNeverFail(t *testing.T) {
	podKind := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	opts := celeval.GuardOptions{Kind: podKind, Type: reflect.TypeFor[corev1.Pod]()}
	withSidecar := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "mesh-proxy", Image: "proxy"}}, Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app"}}}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	many := make([]string, 1_100_000)
	for i := range many {
		many[i] = "g"
	}
	var ins []input
	for _, p := range []*corev1.Pod{withSidecar, plain} {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: raw}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		for _, obj := range []runtime.Object{p, u} {
			ins = append(ins,
				input{name: fmt.Sprintf("create %T %s", obj, p.Spec.Containers[0].Image), op: admission.Create, obj: obj, kind: podKind, resource: "pods", groups: []string{"system:nodes"}},
				input{name: fmt.Sprintf("delete %T", obj), op: admission.Delete, old: obj, kind: podKind, resource: "pods"})
		}
	}
	ins = append(ins,
		input{name: "a ConfigMap", op: admission.Create, obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}},
		input{name: "a Scale", op: admission.Update, obj: &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, old: &autoscalingv1.Scale{},
			sub: "scale", kind: schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, resource: "pods"},
		input{name: "pod exec", op: admission.Connect, obj: &corev1.PodExecOptions{Command: []string{"sh"}}, sub: "exec", kind: schema.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}, resource: "pods"},
		input{name: "1,100,000 groups", op: admission.Create, obj: plain, kind: podKind, resource: "pods", groups: many})
	for _, tc := range []struct {
		expr  string
		sized bool
	}{
		{`!has(object.spec.initContainers) || !object.spec.initContainers.exists(ic, ic.name == "mesh-proxy")`, true},
		{`object.spec.containers.all(c, c.image.startsWith("registry.example.com/"))`, true},
		{`object.spec.containers[0].name == "app" && object.spec.restartPolicy != "Never"`, false},
		{`!("system:nodes" in request.userInfo.groups)`, true},
		{`request.userInfo.groups.exists(g, g == "system:masters")`, true},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			gd, err := celeval.GuardCondition(tc.expr, opts)
			if err != nil {
				t.Fatalf("no guard: %v", err)
			}
			if sized := strings.HasPrefix(gd.Guard, "(size("); sized != tc.sized {
				t.Errorf("guard %s: size guard %v, want %v", gd.Guard, sized, tc.sized)
			}
			if gd.Cost > celconfig.PerCallLimit {
				t.Errorf("cost bound %d past the per-call limit", gd.Cost)
			}
			failed := false
			for _, in := range ins {
				if len(in.groups) > 1 && !strings.Contains(tc.expr, " in request.userInfo.groups") {
					continue // iterated, a million groups take kube-apiserver's matcher tens of seconds
				}
				orig := evaluateAs(t, tc.expr, in)
				got := evaluateAs(t, gd.Expr, in)
				failed = failed || orig == fails
				want := orig
				if orig == fails {
					want = isTrue
				}
				if got != want {
					t.Errorf("%s: %s gives %s, want %s (the condition gives %s)", in.name, gd.Expr, got, want, orig)
				}
			}
			if !failed {
				t.Errorf("the condition fails on none of the inputs: the test proves nothing of %s", gd.Guard)
			}
		})
	}
}

// pushDownOf is the engine of the bundle doc, its first group, and that
// group's push-down without cluster access.
func pushDownOf(t *testing.T, doc string) (*engine.Engine, *policy.Group, render.Report) {
	t.Helper()
	set, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(set, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	g := e.Groups()[0]
	return e, g, render.PushDown(g, set, "w", false)
}
