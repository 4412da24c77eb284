package policy

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMergeSelectors(t *testing.T) {
	in := metav1.LabelSelectorOpIn
	for _, tc := range []struct {
		name string
		a, b *metav1.LabelSelector
		want *metav1.LabelSelector
	}{
		{"both nil", nil, nil, &metav1.LabelSelector{}},
		{"labels union", &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"b": "2"}},
			&metav1.LabelSelector{MatchLabels: map[string]string{"a": "1", "b": "2"}}},
		{"conflicting label becomes an unsatisfiable In", &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"a": "2"}},
			&metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: in, Values: []string{"2"}}}}},
		{"expressions sorted and de-duplicated",
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "z", Operator: in, Values: []string{"y", "x"}}, {Key: "a", Operator: metav1.LabelSelectorOpExists}}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}, {Key: "z", Operator: in, Values: []string{"x", "y"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeSelectors(tc.a, tc.b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestGroups(t *testing.T) {
	src := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pods}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], resourceNames: [a]}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pods-ignore}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods]}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: scoped}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {team: a}}
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments, deployments/scale]}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b-pods}
spec: {policyName: pods, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b-ignore}
spec: {policyName: pods-ignore, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b-scoped-1}
spec:
  policyName: scoped
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b-scoped-2}
spec:
  policyName: scoped
  validationActions: [Warn]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
`
	b, err := Parse([]Source{{Name: "g.yaml", Data: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	groups := b.Groups()
	type summary struct {
		path     string
		fp       admissionregistrationv1.FailurePolicyType
		ns       *metav1.LabelSelector
		bindings []string
		rules    int
	}
	var got []summary
	for _, g := range groups {
		s := summary{path: g.Path(), fp: g.FailurePolicy, ns: g.NamespaceSelector, rules: len(g.Rules)}
		for _, pb := range g.Bindings {
			s.bindings = append(s.bindings, pb.Name)
		}
		got = append(got, s)
	}
	// IDs are digests of (namespaceSelector, objectSelector, failurePolicy)
	// and the bindings' names: they must not change between releases, or
	// deployed webhook configurations would point at routes that no
	// longer exist.
	want := []summary{
		{path: "/validate/39dba6d353", fp: "Fail", ns: &metav1.LabelSelector{}, bindings: []string{"b-pods"}, rules: 1},
		{path: "/validate/9cb91bc79a", fp: "Ignore", ns: &metav1.LabelSelector{}, bindings: []string{"b-ignore"}, rules: 1},
		{path: "/validate/e32951eabd", fp: "Fail", ns: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod", "team": "a"}}, bindings: []string{"b-scoped-1", "b-scoped-2"}, rules: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups:\n got %+v\nwant %+v", got, want)
	}
	// Rules drop resourceNames (webhooks have none; the engine checks them).
	if r := groups[0].Rules[0]; !reflect.DeepEqual(r.Resources, []string{"pods"}) || !reflect.DeepEqual(r.Operations, []admissionregistrationv1.OperationType{"CREATE"}) {
		t.Errorf("default group rule = %+v", r)
	}
	// The binding's own rules narrow the policy's.
	if r := groups[2].Rules[1]; !reflect.DeepEqual(r.Resources, []string{"deployments"}) {
		t.Errorf("scoped group rules = %+v", groups[2].Rules)
	}
}

func TestMutatingGroupsSplitByReinvocationPolicy(t *testing.T) {
	doc := func(name, reinvocation, failure string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  failurePolicy: ` + failure + `
  reinvocationPolicy: ` + reinvocation + `
  mutations: [{patchType: JSONPatch, jsonPatch: {expression: "[]"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec: {policyName: ` + name + `}
---
`
	}
	b, err := Parse([]Source{{Name: "m.yaml", Data: []byte(doc("a", "Never", "Fail") + doc("b", "IfNeeded", "Fail") + doc("c", "Never", "Fail") + doc("d", "Never", "Ignore"))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Groups()) != 0 {
		t.Errorf("validating groups from mutating bindings: %d", len(b.Groups()))
	}
	var got []string
	for _, g := range b.MutatingGroups() {
		var names []string
		for _, mb := range g.MutatingBindings {
			names = append(names, mb.Name)
		}
		got = append(got, fmt.Sprintf("%s %s %s %v", strings.SplitN(g.Path(), "/", 3)[1], g.FailurePolicy, g.ReinvocationPolicy, names))
		if g.Type != Mutating {
			t.Errorf("group %s has type %v", g.Path(), g.Type)
		}
	}
	sort.Strings(got)
	want := []string{"mutate Fail IfNeeded [b]", "mutate Fail Never [a c]", "mutate Ignore Never [d]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups:\n got %q\nwant %q", got, want)
	}
	if g := b.MutatingGroups()[0]; !g.Default || g.ReinvocationPolicy != "Never" || g.FailurePolicy != "Fail" {
		t.Errorf("first group %s (%s, %s), want the default one", g.Path(), g.FailurePolicy, g.ReinvocationPolicy)
	}
}

func TestParseRoute(t *testing.T) {
	for path, want := range map[string]Route{
		"/validate": {Type: Validating}, "/validate/ab12": {Type: Validating, Group: "ab12"},
		"/mutate": {Type: Mutating}, "/mutate/ab12": {Type: Mutating, Group: "ab12"},
	} {
		got, ok := ParseRoute(path)
		if !ok || got != want || got.Path() != path {
			t.Errorf("ParseRoute(%q) = %+v, %v", path, got, ok)
		}
	}
	for _, bad := range []string{"/", "/validate/", "/mutate/a/b", "/mutatex", "/mutating", "mutate", "/validate/a/b"} {
		if r, ok := ParseRoute(bad); ok {
			t.Errorf("ParseRoute(%q) = %+v, want no route", bad, r)
		}
	}
}

// A group's route survives every change kube-apiserver's filtering does not
// see, and changes with every one it does: the function can then tell a
// configuration rendered before a publish from one rendered after it.
func TestGroupIDsFollowFilteringAndMembers(t *testing.T) {
	policyDoc := func(name, expr string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations: [{expression: "` + expr + `"}]
---
`
	}
	bindingDoc := func(name, policy, nsSel string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec:
  policyName: ` + policy + `
  validationActions: [Deny]
  matchResources: {namespaceSelector: ` + nsSel + `}
---
`
	}
	ids := func(docs ...string) map[string]string {
		t.Helper()
		b, err := Parse([]Source{{Name: "b.yaml", Data: []byte(strings.Join(docs, ""))}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, g := range b.Groups() {
			var names []string
			for _, pb := range g.Bindings {
				names = append(names, pb.Name)
			}
			out[strings.Join(names, ",")] = g.ID
		}
		return out
	}
	const prod, all = "{matchLabels: {env: prod}}", "{}"
	base := ids(policyDoc("p", "true"), policyDoc("q", "true"), bindingDoc("bx", "p", prod), bindingDoc("by", "q", prod), bindingDoc("bz", "q", all))
	if len(base) != 2 {
		t.Fatalf("groups %v, want bx,by and bz", base)
	}
	for _, tc := range []struct {
		name string
		got  map[string]string
		same []string // groups whose route must survive
	}{
		{"expression changed", ids(policyDoc("p", "false"), policyDoc("q", "true"), bindingDoc("bx", "p", prod), bindingDoc("by", "q", prod), bindingDoc("bz", "q", all)), []string{"bx,by", "bz"}},
		{"bindings reordered", ids(policyDoc("q", "true"), policyDoc("p", "true"), bindingDoc("by", "q", prod), bindingDoc("bz", "q", all), bindingDoc("bx", "p", prod)), []string{"by,bx", "bz"}},
		{"binding moved", ids(policyDoc("p", "true"), policyDoc("q", "true"), bindingDoc("bx", "p", all), bindingDoc("by", "q", prod), bindingDoc("bz", "q", all)), nil},
		{"binding removed", ids(policyDoc("p", "true"), policyDoc("q", "true"), bindingDoc("bx", "p", prod), bindingDoc("bz", "q", all)), []string{"bz"}},
		{"binding added", ids(policyDoc("p", "true"), policyDoc("q", "true"), bindingDoc("bx", "p", prod), bindingDoc("by", "q", prod), bindingDoc("bz", "q", all), bindingDoc("bw", "p", all)), []string{"bx,by"}},
	} {
		for members, id := range tc.got {
			key := members
			if key == "by,bx" {
				key = "bx,by"
			}
			old, existed := base[key]
			survives := slices.Contains(tc.same, members)
			if survives && id != old {
				t.Errorf("%s: group %s has route %s, want %s as before", tc.name, members, id, old)
			}
			if !survives && existed && id == old {
				t.Errorf("%s: group %s kept route %s", tc.name, members, id)
			}
			for otherMembers, otherOld := range base {
				if otherMembers != key && id == otherOld {
					t.Errorf("%s: group %s took the route %s of group %s", tc.name, members, id, otherMembers)
				}
			}
		}
	}
}
