package render_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/render"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/test/workload"
)

// The oracle: test/workload's APIServer, kube-apiserver's own webhook code
// (the rule and matchConditions matchers its dispatcher calls), decides
// what it would do with a rendered webhook; the engine decides what the
// function answers. A skipped call must be one the function answers with
// nothing (no binding acted); a rejection one it denies.

type call = workload.Call

const (
	notSent  = workload.NotSent
	skipped  = workload.Skipped
	sent     = workload.Sent
	rejected = workload.Rejected
)

// request is one write, as kube-apiserver would present it.
type request struct {
	op                         admission.Operation
	group, version, resource   string
	sub, kind, namespace, name string
	user                       string
	groups                     []string
	labels                     map[string]string
}

func (r request) String() string {
	res := r.resource
	if r.sub != "" {
		res += "/" + r.sub
	}
	return fmt.Sprintf("%s %s/%s %s %s/%s by %s", r.op, r.group, r.version, res, r.namespace, r.name, r.user)
}

func (r request) object() *unstructured.Unstructured {
	meta := map[string]any{"name": r.name}
	if r.namespace != "" {
		meta["namespace"] = r.namespace
	}
	if r.labels != nil {
		labels := map[string]any{}
		for k, v := range r.labels {
			labels[k] = v
		}
		meta["labels"] = labels
	}
	apiVersion := r.version
	if r.group != "" {
		apiVersion = r.group + "/" + r.version
	}
	container := map[string]any{"name": "app", "image": "registry.example.com/app:1.0", "imagePullPolicy": "Always",
		"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1Gi"}, "requests": map[string]any{"cpu": "1", "memory": "1Gi"}}}
	podSpec := map[string]any{"containers": []any{container}}
	spec := map[string]any{"replicas": int64(2), "containers": []any{container}, "template": map[string]any{"metadata": map[string]any{}, "spec": podSpec}}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": r.kind, "metadata": meta, "spec": spec, "data": map[string]any{"k": "v"}}}
}

// write is r as test/workload plays it: a create, an update that leaves
// the object as it was, or a delete.
func (r request) write() workload.Write {
	w := workload.Write{As: workload.Identity{User: r.user, Groups: r.groups}, Resource: schema.GroupVersionResource{Group: r.group, Version: r.version, Resource: r.resource},
		Kind: r.kind, Subresource: r.sub, Namespace: r.namespace, Name: r.name}
	switch r.op {
	case admission.Create:
		w.Verb, w.Object = "create", r.object()
	case admission.Update:
		w.Verb, w.Old, w.Patch = "patch", r.object(), []byte("{}")
	default:
		w.Verb, w.Old = "delete", r.object()
	}
	return w
}

// apiserver is what kube-apiserver does with r for a webhook of rules and
// conds under fp.
func apiserver(t *testing.T, rules []admissionregistrationv1.RuleWithOperations, conds []admissionregistrationv1.MatchCondition, fp admissionregistrationv1.FailurePolicyType, r request) (call, string) {
	t.Helper()
	hook := workload.Webhooks(&admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name: "test.admitfn.io", Rules: rules, MatchConditions: conds, FailurePolicy: &fp,
		NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
	}}}, nil)[0]
	c, err := oracle.Decide(r.write(), hook)
	if c == notSent && err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return c, msg
}

var oracle = workload.NewAPIServer(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})

// answer is what the function answers: whether no binding acted, and
// whether it allowed.
func answer(t *testing.T, e *engine.Engine, g *policy.Group, r request) (idle, allowed bool, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	body, err := r.write().Review()
	if err != nil {
		t.Fatal(err)
	}
	res := reviewOn(t, e, g, body)
	resp = res.Response
	return res.Idle && resp.Allowed && len(resp.Warnings) == 0 && len(resp.Patch) == 0 && len(resp.AuditAnnotations) == 0, resp.Allowed, resp
}

// reviewOn is the engine's answer to the AdmissionReview body on g's route.
func reviewOn(t *testing.T, e *engine.Engine, g *policy.Group, body []byte) *engine.Result {
	t.Helper()
	req, err := review.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Review(context.Background(), g.Route(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// requests is a grid of writes: controllers, nodes and people, on the
// resources the repository's policies name and others.
func requests() []request {
	type res struct{ group, version, resource, kind string }
	resources := []res{
		{"", "v1", "pods", "Pod"}, {"", "v1", "configmaps", "ConfigMap"}, {"", "v1", "secrets", "Secret"},
		{"", "v1", "services", "Service"}, {"", "v1", "namespaces", "Namespace"}, {"", "v1", "nodes", "Node"},
		{"apps", "v1", "deployments", "Deployment"}, {"apps", "v1", "statefulsets", "StatefulSet"}, {"apps", "v1", "replicasets", "ReplicaSet"},
		{"coordination.k8s.io", "v1", "leases", "Lease"}, {"rbac.authorization.k8s.io", "v1", "roles", "Role"},
		{"batch", "v1", "jobs", "Job"}, {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"},
	}
	users := []struct {
		name   string
		groups []string
	}{
		{"alice", []string{"system:authenticated"}},
		{"system:node:n1", []string{"system:nodes", "system:authenticated"}},
		{"system:serviceaccount:kube-system:replicaset-controller", []string{"system:serviceaccounts", "system:authenticated"}},
	}
	var out []request
	for _, rs := range resources {
		for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete} {
			for _, sub := range []string{"", "status"} {
				for _, u := range users {
					for _, name := range []string{"demo-app", "keep", "app"} {
						for _, labels := range []map[string]string{nil, {"team": "a", "admitfn.example.com/demo": "true", "environment": "test"}} {
							ns := "team-a"
							switch {
							case rs.resource == "namespaces" && op != admission.Create:
								// A Namespace's own path names it:
								// its requests carry it as their
								// namespace.
								ns = name
							case rs.resource == "namespaces" || rs.resource == "nodes":
								ns = ""
							}
							out = append(out, request{op: op, group: rs.group, version: rs.version, resource: rs.resource, sub: sub, kind: rs.kind,
								namespace: ns, name: name, user: u.name, groups: u.groups, labels: labels})
						}
					}
				}
			}
		}
	}
	return out
}

// rendered is the webhook render gives group g.
func rendered(t *testing.T, g *policy.Group, opts render.Options) admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	if g.Type == policy.Validating {
		v, err := render.Validating([]*policy.Group{g}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return v.Webhooks[0]
	}
	m, err := render.Mutating([]*policy.Group{g}, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Webhooks[0]
	return admissionregistrationv1.ValidatingWebhook{Name: w.Name, Rules: w.Rules, MatchConditions: w.MatchConditions, FailurePolicy: w.FailurePolicy}
}

// checkBundle renders set with push-down and plays every request through
// kube-apiserver's side and the function's, and returns how many calls were
// sent and skipped.
func checkBundle(t *testing.T, set *policy.Set, opts render.Options) (sentN, skippedN int) {
	t.Helper()
	e, err := engine.New(set, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	opts.PushDown, opts.Policies = true, set
	if opts.URL == "" {
		opts.URL = "https://fn.example.com"
	}
	reqs := requests()
	for _, g := range e.Groups() {
		h := rendered(t, g, opts)
		for _, r := range reqs {
			c, msg := apiserver(t, g.Rules, h.MatchConditions, g.FailurePolicy, r)
			switch c {
			case skipped:
				skippedN++
				if idle, _, resp := answer(t, e, g, r); !idle {
					t.Errorf("%s: %s skips %s, on which the function answers %+v", set.ID, h.Name, r, resp)
				}
			case rejected:
				if _, allowed, resp := answer(t, e, g, r); allowed {
					t.Errorf("%s: %s rejects %s (%s), which the function allows: %+v", set.ID, h.Name, r, msg, resp)
				}
			case sent:
				sentN++
			}
		}
	}
	return sentN, skippedN
}

func loadDir(t *testing.T, dir string) *policy.Set {
	t.Helper()
	set, err := policy.LoadFS(os.DirFS(dir), ".")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Every bundle of the repository: a call kube-apiserver skips is one the
// function would have answered with nothing.
func TestPushDownNeverSkipsWhatAPolicyActsOn(t *testing.T) {
	for _, dir := range []string{"../../policies/examples", "../../policies/library", "testdata/pushdown"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			set := loadDir(t, dir)
			s, k := checkBundle(t, set, render.Options{})
			t.Logf("%s: %d calls sent, %d skipped", dir, s, k)
			if dir != "../../policies/library" && k == 0 {
				t.Errorf("%s: push-down skipped no call", dir)
			}
		})
	}
}

func parseFiles(t *testing.T, names ...string) *policy.Set {
	t.Helper()
	var sources []policy.Source
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata/pushdown", n))
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, policy.Source{Name: n, Data: data})
	}
	set, err := policy.Parse(sources)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func person(r request) request {
	r.user, r.groups = "alice", []string{"system:authenticated"}
	return r
}

func node(r request) request {
	r.user, r.groups = "system:node:n1", []string{"system:nodes", "system:authenticated"}
	return r
}

func write(op admission.Operation, group, resource, kind, namespace, name string) request {
	return person(request{op: op, group: group, version: "v1", resource: resource, kind: kind, namespace: namespace, name: name})
}

// Each construct: a request its policy acts on is still sent, one it
// ignores is not, and render says what it pushed.
func TestPushDownConstructs(t *testing.T) {
	cmCreate := write(admission.Create, "", "configmaps", "ConfigMap", "team-a", "app")
	secretUpdate := func(name string) request { return write(admission.Update, "", "secrets", "Secret", "team-a", name) }
	serviceCreate := func(name string) request { return write(admission.Create, "", "services", "Service", "team-a", name) }
	job := func(op admission.Operation) request { return write(op, "batch", "jobs", "Job", "team-a", "app") }
	nsCreate := write(admission.Create, "", "namespaces", "Namespace", "", "app")
	type check struct {
		r    request
		want call
	}
	for _, tc := range []struct {
		name   string
		files  []string
		pushed map[string][]string
		checks []check
	}{
		{"matchConditions", []string{"conditions.yaml"}, map[string][]string{"people-configmaps": {"guarded matchCondition not-system"}},
			[]check{{cmCreate, sent}, {node(cmCreate), skipped}}},
		{"resourceNames", []string{"names.yaml"}, map[string][]string{"locked-secret": {"resource rules", "resourceNames"}},
			[]check{{secretUpdate("keep"), sent}, {secretUpdate("app"), skipped}}},
		{"excludeResourceRules", []string{"exclude.yaml"}, map[string][]string{"service-names": {"excludeResourceRules"}},
			[]check{{serviceCreate("app"), sent}, {serviceCreate("keep"), skipped}}},
		{"operations", []string{"operations.yaml"}, map[string][]string{"job-create": {"resource rules"}},
			[]check{{job(admission.Create), sent}, {job(admission.Update), skipped}}},
		{"scope", []string{"scope.yaml"}, map[string][]string{"namespaced-core": {"resource rules"}},
			[]check{{cmCreate, sent}, {nsCreate, skipped}}},
		{"mixed group", []string{"conditions.yaml", "names.yaml", "exclude.yaml", "operations.yaml", "scope.yaml"},
			map[string][]string{
				"people-configmaps": {"resource rules", "guarded matchCondition not-system"},
				"locked-secret":     {"resource rules", "resourceNames"},
				"service-names":     {"resource rules", "excludeResourceRules"},
				"job-create":        {"resource rules"},
				"namespaced-core":   {"resource rules"},
			},
			[]check{
				// scope.yaml acts on every namespaced core creation,
				// the node's ConfigMap included.
				{cmCreate, sent}, {node(cmCreate), sent},
				{secretUpdate("keep"), sent}, {secretUpdate("app"), skipped},
				{serviceCreate("app"), sent}, {node(serviceCreate("keep")), sent},
				{job(admission.Create), sent}, {job(admission.Update), skipped},
				{nsCreate, skipped},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := parseFiles(t, tc.files...)
			e, err := engine.New(set, celeval.NewCompiler())
			if err != nil {
				t.Fatal(err)
			}
			groups := e.Groups()
			if len(groups) != 1 {
				t.Fatalf("%d groups, want 1", len(groups))
			}
			g := groups[0]
			rep := render.PushDown(g, set, "w", false)
			got := map[string][]string{}
			for _, b := range rep.Bindings {
				got[b.Binding] = b.Pushed
				for _, g := range b.Guarded {
					got[b.Binding] = append(got[b.Binding], "guarded "+g.What)
				}
				for _, k := range b.Kept {
					t.Errorf("binding %s: not pushed: %s: %s", b.Binding, k.What, k.Why)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.pushed) {
				t.Errorf("pushed:\n got %v\nwant %v", got, tc.pushed)
			}
			for _, c := range tc.checks {
				gotCall, msg := apiserver(t, g.Rules, rep.Conditions, g.FailurePolicy, c.r)
				if gotCall != c.want {
					t.Errorf("%s: %s %s, want %s", c.r, gotCall, msg, c.want)
				}
				idle, _, resp := answer(t, e, g, c.r)
				if idle != (c.want == skipped) {
					t.Errorf("%s: the function acts: %v (%+v), want %v", c.r, !idle, resp.Result, c.want != skipped)
				}
			}
		})
	}
}

// What a webhook's conditions cannot read stays with the function: the
// webhook keeps only the rules, and calls for every request they match.
func TestPushDownKeepsWhatAWebhookCannotRead(t *testing.T) {
	set := parseFiles(t, "params.yaml", "namespaceobject.yaml", "variables.yaml")
	e, err := engine.New(set, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	g := e.Groups()[0]
	rep := render.PushDown(g, set, "w", false)
	want := map[string]string{
		"params-condition":    "matchCondition listed-user: reads params, which kube-apiserver does not give a webhook's conditions",
		"namespace-condition": "matchCondition labelled-namespace: reads namespaceObject, which kube-apiserver does not give a webhook's conditions",
		"variables-condition": "matchCondition person: reads variables, which a webhook's conditions do not have",
	}
	got := map[string]string{}
	for _, b := range rep.Bindings {
		for _, k := range b.Kept {
			got[b.Binding] = k.What + ": " + k.Why
		}
		if len(b.Pushed) > 0 {
			t.Errorf("binding %s: pushed %v", b.Binding, b.Pushed)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kept:\n got %v\nwant %v", got, want)
	}
	if len(rep.Conditions) != 0 {
		t.Errorf("conditions %v, want none", rep.Conditions)
	}
	// The conditions would skip these; the webhook sends them.
	for _, r := range []request{
		node(write(admission.Create, "apps", "deployments", "Deployment", "team-a", "app")),
		node(write(admission.Create, "apps", "replicasets", "ReplicaSet", "team-a", "app")),
		write(admission.Create, "apps", "statefulsets", "StatefulSet", "team-a", "app"),
	} {
		if c, _ := apiserver(t, g.Rules, rep.Conditions, g.FailurePolicy, r); c != sent {
			t.Errorf("%s: %s, want sent", r, c)
		}
	}
	// With cluster access, a condition that asks the authorizer is pushed;
	// without, the function has no authorizer to agree with.
	authz := policy.Source{Name: "authz.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: authz}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - name: cannot-escalate
    expression: "!authorizer.group('').resource('pods').subresource('exec').check('create').allowed()"
  validations:
  - expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: authz}
spec:
  policyName: authz
  validationActions: [Deny]
`)}
	set, err = policy.Parse([]policy.Source{authz})
	if err != nil {
		t.Fatal(err)
	}
	g = set.Groups()[0]
	if rep := render.PushDown(g, set, "w", false); len(rep.Conditions) != 0 || rep.Bindings[0].Kept[0].Why != "reads authorizer, which the function answers only with cluster access (render --cluster)" {
		t.Errorf("without cluster access: %+v", rep)
	}
	if rep := render.PushDown(g, set, "w", true); len(rep.Conditions) != 1 || rep.Conditions[0].Name != "cannot-escalate" {
		t.Errorf("with cluster access: %+v", rep)
	}
}

// A pushed condition never decides a request by failing: under Fail it is
// guarded, and kube-apiserver sends what it could fail on to the function,
// which denies in upstream's words; under Ignore a failure skips the call,
// and the function would have skipped the policy.
func TestPushDownErrors(t *testing.T) {
	for _, fp := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(fp), func(t *testing.T) {
			e, g, rep := pushDownOf(t, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: team}
spec:
  failurePolicy: `+string(fp)+`
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - name: team-a
    expression: "object.metadata.labels.team == 'a'"
  validations:
  - expression: "object.metadata.name != 'app'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: team}
spec:
  policyName: team
  validationActions: [Deny]
`)
			if len(rep.Conditions) != 1 {
				t.Fatalf("conditions %v", rep.Conditions)
			}
			unlabelled := write(admission.Create, "", "configmaps", "ConfigMap", "team-a", "other")
			c, msg := apiserver(t, g.Rules, rep.Conditions, g.FailurePolicy, unlabelled)
			idle, allowed, resp := answer(t, e, g, unlabelled)
			switch fp {
			case admissionregistrationv1.Fail:
				// The guard sends it; the function answers in upstream's
				// words.
				if c != sent || msg != "" {
					t.Errorf("kube-apiserver: %s %q", c, msg)
				}
				if allowed || resp.Result.Code != 422 || resp.Result.Message != "ValidatingAdmissionPolicy 'team' with binding 'team' denied request: expression 'object.metadata.labels.team == 'a'' resulted in error: no such key: labels" {
					t.Errorf("function: %+v", resp.Result)
				}
			case admissionregistrationv1.Ignore:
				if c != skipped || !idle {
					t.Errorf("kube-apiserver %s, function idle %v", c, idle)
				}
			}
		})
	}
}

// Under failurePolicy Fail a binding that takes params keeps its
// conditions: kube-apiserver denies it when its params are missing, before
// its conditions.
func TestPushDownUnderFail(t *testing.T) {
	const paramsWhy = "under failurePolicy Fail: the binding takes params, and kube-apiserver denies a binding whose params are missing before it evaluates its conditions"
	policyDoc := func(name, extra, bindingExtra string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  failurePolicy: Fail
` + extra + `  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - name: people
    expression: "!request.userInfo.username.startsWith('system:')"
  validations:
  - expression: "object.metadata.name != 'app'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec:
  policyName: ` + name + `
` + bindingExtra
	}
	for _, tc := range []struct {
		name, doc, why string
	}{
		{"params", policyDoc("p", "  paramKind: {apiVersion: v1, kind: ConfigMap}\n", "  validationActions: [Deny]\n  paramRef: {name: c, namespace: admitfn, parameterNotFoundAction: Deny}\n") +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: admitfn}\n",
			paramsWhy},
		{"params without a paramRef", policyDoc("p", "  paramKind: {apiVersion: v1, kind: ConfigMap}\n", "  validationActions: [Deny]\n"),
			paramsWhy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(tc.doc)}})
			if err != nil {
				t.Fatal(err)
			}
			rep := render.PushDown(set.Groups()[0], set, "w", false)
			if len(rep.Conditions) != 0 || len(rep.Bindings[0].Kept) != 1 || rep.Bindings[0].Kept[0] != (render.Kept{What: "matchCondition people", Why: tc.why}) {
				t.Errorf("%+v", rep)
			}
		})
	}
}
