package lint

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/admitfn/admitfn/core/policy"
)

func bundle(t *testing.T, yaml string) *policy.Set {
	t.Helper()
	b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(yaml)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const head = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
`

func TestFindings(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"clean", head + `  validations: [{expression: "object.spec.replicas <= 3", messageExpression: "'got ' + string(object.spec.replicas)"}]
`, nil},
		{"undefined field", head + `  validations: [{expression: "object.spec.replicaz > 1"}]
`, []string{"p.yaml: document 1: error: ValidatingAdmissionPolicy p: spec.validations[0].expression: apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz > 1\n | ...........^"}},
		{"a message's field", head + `  validations: [{expression: "true", messageExpression: "'got ' + string(object.spec.replica)"}]
`, []string{"p.yaml: document 1: error: ValidatingAdmissionPolicy p: spec.validations[0].messageExpression: apps/v1, Kind=Deployment: ERROR: <input>:1:..."}},
		{"nested fields and quantities", head + `  validations:
  - expression: "object.spec.template.spec.containers.all(c, c.resources.limits['cpu'] == '1' && c.image.startsWith('r/'))"
  - expression: "object.spec.strategy.rollingUpdate.maxSurge == 1 || object.metadata.creationTimestamp != null"
`, nil},
		{"authorizer", head + `  validations: [{expression: "authorizer.group('apps').resource('deployments').check('create').allowed()"}]
`, []string{"p.yaml: document 1: warning: ValidatingAdmissionPolicy p: spec.validations[0].expression: admitfn has no authorizer (kube-apiserver authorizes, the function cannot): every authorizer check fails, and the failure policy decides"}},
		{"namespaceObject beyond its name", head + `  variables: [{name: ns, expression: "namespaceObject.metadata.name"}]
  validations:
  - expression: "namespaceObject.?metadata.?name.orValue('') != 'x'"
  - expression: "'env' in namespaceObject.metadata.labels"
`, []string{"p.yaml: document 1: warning: ValidatingAdmissionPolicy p: spec.validations[1].expression: namespaceObject.metadata.labels: a function is not sent the namespace, so namespaceObject holds only metadata.name; select on namespace labels with the binding's namespaceSelector"}},
		{"wildcards and custom resources", `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}
  validations: [{expression: "true"}]
`, []string{
			"p.yaml: document 1: warning: ValidatingAdmissionPolicy p: spec.matchConstraints.resourceRules[0]: wildcards: the expressions are not type-checked for the kinds this rule matches",
			"p.yaml: document 1: warning: ValidatingAdmissionPolicy p: spec.matchConstraints.resourceRules[1]: example.com/v1, Resource=widgets is not a built-in resource: the expressions are not type-checked against it",
		}},
		{"mutations", `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: m}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'ns-env': namespaceObject.metadata.labels['env']}}}"}
`, []string{"p.yaml: document 1: warning: MutatingAdmissionPolicy m: spec.mutations[0].applyConfiguration.expression: namespaceObject.metadata.labels: a function is not sent the namespace, so namespaceObject holds only metadata.name; select on namespace labels with the binding's namespaceSelector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range Set(bundle(t, tc.yaml)) {
				got = append(got, f.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				// "..." in a wanted finding stands for the rest of it.
				if w, ok := strings.CutSuffix(tc.want[i], "..."); ok {
					if !strings.HasPrefix(got[i], w) {
						t.Errorf("finding %d:\n got: %s\nwant: %s…", i, got[i], w)
					}
				} else if got[i] != tc.want[i] {
					t.Errorf("finding %d:\n got: %s\nwant: %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestManyGroups(t *testing.T) {
	var docs []string
	for _, label := range []string{"a", "b", "c", "d", "e"} {
		docs = append(docs, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b-`+label+`}
spec:
  policyName: p
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {team: `+label+`}}}`)
	}
	b := bundle(t, head+"  validations: [{expression: \"true\"}]\n---\n"+strings.Join(docs, "\n---\n")+"\n")
	var got []string
	for _, f := range Set(b) {
		got = append(got, f.String())
	}
	want := []string{"warning: bundle: the bindings' selectors, failure policies and reinvocation policies make 5 webhook groups: kube-apiserver calls the function once per matching group; bindings that share selectors share a group"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings %q", got)
	}
}

func TestLibraryIsClean(t *testing.T) {
	dirs, err := os.ReadDir("../../policies/library")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		b, err := policy.LoadFS(os.DirFS("../../policies/library/"+d.Name()), ".")
		if err != nil {
			t.Fatal(err)
		}
		// Clean on the oldest cluster lint checks for, too.
		if f := SetWith(b, Options{KubernetesVersion: MinKubernetesVersion}); len(f) > 0 {
			t.Errorf("%s: %v", d.Name(), f)
		}
	}
}

func TestAmplificationWarnings(t *testing.T) {
	var got []string
	at := func(rule, field, msg string) { got = append(got, rule+" "+field+": "+msg) }
	for _, expr := range []string{
		"object.metadata.annotations['t'].replace('${V}', object.metadata.annotations['v']).size() < 10",
		"object.spec.items.join(params.sep) != ''",
		"'%s-%s'.format([object.metadata.name, object.metadata.namespace]) != ''",
		"lists.range(object.spec.replicas).size() > 0",
		// literals decide the growth: no warning
		"object.metadata.name.replace('-', '_') != ''",
		"object.spec.items.join(', ') != ''",
		"object.spec.items.join() != ''",
		"'%s'.format(['x']) != ''",
		"lists.range(3).size() > 0",
	} {
		checkAmplification("f", expr, at)
	}
	tail := " can build a value many times the object's size: admitfn stops any call at 7 MiB and charges what it builds beyond its input to the cost budget, which kube-apiserver does not (there it can exhaust the apiserver's memory)"
	want := []string{
		"amplifying-call f: replace() with a replacement taken from the request or params" + tail,
		"amplifying-call f: join() with a separator taken from the request or params" + tail,
		"amplifying-call f: format() with arguments taken from the request or params" + tail,
		"amplifying-call f: lists.range() with a length taken from the request or params" + tail,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// typeCheck answers what upstream's TypeChecker.Check answers: for every
// ValidatingAdmissionPolicy of the repository's bundles (clean, so checked
// at once), and for policies with an issue in one expression of several
// (checked by upstream, expression by expression).
func TestTypeCheckIsUpstreams(t *testing.T) {
	tc := typeChecker(restMapper(scheme.Scheme))
	var policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	dirs, _ := filepath.Glob("../../policies/library/*/")
	for _, dir := range append(dirs, "../../policies/examples") {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		b, err := policy.LoadFS(os.DirFS(dir), ".")
		if err != nil {
			t.Fatal(err)
		}
		policies = append(policies, b.Policies...)
	}
	if len(policies) < 7 {
		t.Fatalf("%d policies: the bundles moved", len(policies))
	}
	withIssues := 0
	for _, yaml := range []string{
		head + "  validations:\n  - expression: 'object.spec.replicas > 1'\n  - expression: 'object.spec.nope == 1'\n    messageExpression: \"'replicas: ' + string(object.spec.replicas)\"\n",
		head + "  validations:\n  - expression: 'object.spec.replicas > 1'\n    messageExpression: 'object.spec.replicas'\n  - expression: \"object.metadata.name == 1\"\n",
		head + "  variables:\n  - {name: r, expression: 'object.spec.replicas'}\n  validations:\n  - expression: 'variables.r > 1'\n  - expression: \"variables.r.startsWith('x')\"\n",
	} {
		policies = append(policies, bundle(t, yaml).Policies...)
		withIssues++
	}
	for i, p := range policies {
		got, want := typeCheck(tc, p), tc.Check(p)
		if !reflect.DeepEqual(got, want) || (i >= len(policies)-withIssues) != (len(want) > 0) {
			t.Errorf("%s: typeCheck %v\nupstream %v", p.Name, got, want)
		}
	}
}
