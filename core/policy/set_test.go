package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const policyYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: p1.example.com
spec:
  paramKind:
    apiVersion: rules.example.com/v1
    kind: ReplicaLimit
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= params.maxReplicas"
`

const bindingYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: b1
spec:
  policyName: p1.example.com
  validationActions: [Deny]
  paramRef:
    name: limit
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels: {env: test}
`

const paramYAML = `apiVersion: rules.example.com/v1
kind: ReplicaLimit
metadata: {name: limit}
maxReplicas: 3
`

func TestParseDefaultsLikeKubeAPIServer(t *testing.T) {
	b, err := Parse([]Source{{Name: "all.yaml", Data: []byte("---\n" + policyYAML + "---\n" + bindingYAML + "---\n# only a comment\n---\n" + paramYAML)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Policies) != 1 || len(b.Bindings) != 1 || len(b.Params) != 1 {
		t.Fatalf("got %d policies, %d bindings, %d params", len(b.Policies), len(b.Bindings), len(b.Params))
	}
	p := b.Policies[0]
	fail, equivalent, all := admissionregistrationv1.Fail, admissionregistrationv1.Equivalent, admissionregistrationv1.AllScopes
	if !reflect.DeepEqual(p.Spec.FailurePolicy, &fail) {
		t.Errorf("failurePolicy = %v, want Fail", p.Spec.FailurePolicy)
	}
	mc := p.Spec.MatchConstraints
	if !reflect.DeepEqual(mc.MatchPolicy, &equivalent) || !reflect.DeepEqual(mc.NamespaceSelector, &metav1.LabelSelector{}) ||
		!reflect.DeepEqual(mc.ObjectSelector, &metav1.LabelSelector{}) || !reflect.DeepEqual(mc.ResourceRules[0].Scope, &all) {
		t.Errorf("matchConstraints not defaulted: %+v", mc)
	}
	if got := b.Origin("ValidatingAdmissionPolicyBinding", "b1"); got != (Origin{File: "all.yaml", Document: 2}) {
		t.Errorf("binding origin = %v", got)
	}
	if b.Params[0].GetName() != "limit" {
		t.Errorf("param = %v", b.Params[0])
	}
	if len(b.ID) != 16 {
		t.Errorf("bundle ID %q", b.ID)
	}
	again, _ := Parse([]Source{{Name: "all.yaml", Data: []byte("---\n" + policyYAML + "---\n" + bindingYAML + "---\n# only a comment\n---\n" + paramYAML)}})
	if again.ID != b.ID {
		t.Errorf("same sources, different IDs: %s %s", b.ID, again.ID)
	}
}

func TestParseListAndJSON(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[` +
		`{"apiVersion":"admissionregistration.k8s.io/v1beta1","kind":"ValidatingAdmissionPolicy","metadata":{"name":"p2"},"spec":{"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["*"],"resources":["pods"]}]},"validations":[{"expression":"true"}]}},` +
		`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding","metadata":{"name":"b2"},"spec":{"policyName":"p2","validationActions":["Warn","Audit"]}}]}`
	b, err := Parse([]Source{{Name: "list.json", Data: []byte(list)}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Policies[0].Name != "p2" || b.Bindings[0].Name != "b2" {
		t.Fatalf("got %v %v", b.Policies, b.Bindings)
	}
}

func TestParseErrorsListEveryProblemWithFileAndDocument(t *testing.T) {
	sources := []Source{
		{Name: "a.yaml", Data: []byte(policyYAML + "---\n" + bindingYAML)},
		{Name: "b.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p1.example.com}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typo}
spec:
  validatons: []
---
- just a list
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: orphan}
spec:
  policyName: nowhere
  validationActions: [Deny, Warn]
  paramRef: {name: x, selector: {}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: Bad_Name}
spec:
  failurePolicy: Sometimes
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, FROB], resources: [pods]}]
  validations:
  - expression: "true"
    message: "two\nlines"
    reason: Teapot
  auditAnnotations:
  - {key: "a/b", valueExpression: "'x'"}
  variables:
  - {name: "in", expression: "1"}
`)},
		{Name: "c.yaml", Data: []byte(":\n  - [unclosed")},
	}
	_, err := Parse(sources)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error %v is not Errors", err)
	}
	want := []string{
		`b.yaml: document 2: ValidatingAdmissionPolicy "p1.example.com" is already defined at a.yaml: document 1`,
		`b.yaml: document 3: ValidatingAdmissionPolicy: unknown field "spec.validatons"`,
		`b.yaml: document 4: document is not a Kubernetes object (a YAML mapping with apiVersion and kind)`,
		`c.yaml: document 1: invalid YAML: yaml: did not find expected key`,
		`b.yaml: document 1: unknown kind "ConfigMap" (apiVersion "v1"): not a ValidatingAdmissionPolicy, MutatingAdmissionPolicy, one of their bindings, or the paramKind of any policy in the bundle`,
		`b.yaml: policy Bad_Name: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`b.yaml: policy Bad_Name: spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"`,
		`b.yaml: policy Bad_Name: spec.matchConstraints.resourceRules[0].operations[1]: Unsupported value: "FROB": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"`,
		`b.yaml: policy Bad_Name: spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier`,
		`b.yaml: policy Bad_Name: spec.validations[0].message: Invalid value: "two\nlines": must not contain line breaks`,
		`b.yaml: policy Bad_Name: spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"`,
		`b.yaml: policy Bad_Name: spec.auditAnnotations[0].key: Invalid value: "a/b": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
		`b.yaml: binding orphan: spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)`,
		`b.yaml: binding orphan: spec.paramRef.name: Forbidden: name and selector are mutually exclusive`,
		`b.yaml: binding orphan: spec.paramRef.parameterNotFoundAction: Required value`,
		`b.yaml: binding orphan: spec.policyName: Not found: "nowhere"`,
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if !strings.HasPrefix(err.Error(), "16 errors in policy bundle:\n  b.yaml: document 2:") {
		t.Errorf("Error() = %s", err)
	}
}

func TestParamsNeedANameAndAreUnique(t *testing.T) {
	_, err := Parse([]Source{{Name: "x.yaml", Data: []byte(policyYAML + "---\n" + paramYAML + "---\n" + paramYAML + "---\napiVersion: rules.example.com/v1\nkind: ReplicaLimit\nmaxReplicas: 1\n")}})
	want := "2 errors in policy bundle:\n  x.yaml: document 3: ReplicaLimit \"limit\" is already defined at x.yaml: document 2\n  x.yaml: document 4: ReplicaLimit: metadata.name is required"
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}

func TestLoadFS(t *testing.T) {
	fsys := fstest.MapFS{
		"bundle/a.yaml":          {Data: []byte(policyYAML)},
		"bundle/sub/b.yml":       {Data: []byte(bindingYAML)},
		"bundle/sub/limit.json":  {Data: []byte(`{"apiVersion":"rules.example.com/v1","kind":"ReplicaLimit","metadata":{"name":"limit"},"maxReplicas":3}`)},
		"bundle/README.md":       {Data: []byte("not a manifest")},
		"bundle/.hidden.yaml":    {Data: []byte("garbage: [")},
		"bundle/.git/HEAD.yaml":  {Data: []byte("garbage: [")},
		"empty/notes.txt":        {Data: []byte("nothing")},
		"bundle/sub/.swap.yml":   {Data: []byte("garbage: [")},
		"bundle/sub/kustom.yaml": {Data: []byte("# comments only\n")},
		"bundle/a_test.yaml":     {Data: []byte("cases: [{name: c}]\n")}, // admitfn test files are not bundle documents
		"bundle/sub/b_test.yml":  {Data: []byte("cases: []\n")},
	}
	b, err := LoadFS(fsys, "bundle")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Origin("ValidatingAdmissionPolicyBinding", "b1").File; got != "sub/b.yml" {
		t.Errorf("binding file = %q, want sub/b.yml", got)
	}
	if len(b.Params) != 1 {
		t.Errorf("params = %d", len(b.Params))
	}
	if _, err := LoadFS(fsys, "empty"); err == nil || err.Error() != `read policy bundle: no .yaml, .yml or .json files in "empty"` {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := LoadFS(fsys, "missing"); err == nil || !strings.HasPrefix(err.Error(), "read policy bundle: ") {
		t.Errorf("missing dir: %v", err)
	}
}
