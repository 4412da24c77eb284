package lint

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// A two-variable comprehension (CEL environment 1.32): a kube-apiserver
// accepts it from 1.33, whose compatibility version is 1.32.
func TestKubernetesVersion(t *testing.T) {
	b := bundle(t, head+`  variables:
  - name: named
    expression: "object.spec.template.spec.containers.all(i, c, c.name != '')"
  validations:
  - expression: "variables.named"
  - expression: "object.metadata.name.size() < 64"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: m}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  matchConditions:
  - name: pairs
    expression: "object.metadata.?labels.orValue({}).exists(k, v, v == 'x')"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'seen': 'yes'}}}"}
  reinvocationPolicy: Never
`)
	for _, tc := range []struct {
		minor int
		want  []string
	}{
		{31, []string{
			"ValidatingAdmissionPolicy p: spec.variables[0].expression: Kubernetes 1.31 refuses it (compilation failed: ERROR: <input>:1:41: undeclared reference to 'all' (in container '')); it needs 1.33 or later",
			"MutatingAdmissionPolicy m: spec.matchConditions[0].expression: Kubernetes 1.31 refuses it (compilation failed: ERROR: <input>:1:43: undeclared reference to 'exists' (in container '')); it needs 1.33 or later",
		}},
		{33, nil},
		{37, nil},
	} {
		var got []string
		for _, f := range SetWith(b, Options{KubernetesVersion: version.MajorMinor(1, uint(tc.minor))}) {
			if f.Rule == KubernetesVersion {
				if f.Severity != Warning {
					t.Errorf("severity %s", f.Severity)
				}
				got = append(got, f.Object+": "+f.Field+": "+f.Message)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("1.%d: %d findings, want %d:\n%v", tc.minor, len(got), len(tc.want), got)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("1.%d:\n got %s\nwant %s", tc.minor, got[i], tc.want[i])
			}
		}
	}
}
