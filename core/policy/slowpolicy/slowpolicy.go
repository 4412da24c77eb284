// Package slowpolicy is a bundle whose review takes tens of seconds of CEL
// work without breaking any cost limit, and the request that makes it so:
// the tests that check a deadline bounds a review end to end use it.
package slowpolicy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Route is the validating route the bundle's bindings are served on.
const Route = "/validate"

// Name is the name of the ConfigMaps the bundle matches; it lets every
// other object through.
const Name = "slow-wide"

// Keys is the ConfigMap data size: 100² iterations for each expression.
const Keys = 100

// Bundle is one policy with 15 such expressions and 60 Deny bindings: each
// binding has its own runtime budget (10,000,000), so a review runs for
// about 10s without breaking a limit. Its failurePolicy is Fail, so
// kube-apiserver shows the error the function answers with. Each
// expression ends in a replace that never runs: it leaves the expression
// without a cost bound (core/celeval/internal/cost), so it is evaluated
// with cel-go's cost tracker, whose stack makes the nested fold slow
// (untracked, it would not outlast the tests' deadlines).
func Bundle() string {
	var b strings.Builder
	b.WriteString(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: slow.admitfn.io}
spec:
  failurePolicy: Fail
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}
  matchConditions: [{name: slow, expression: "object.metadata.name == '` + Name + `'"}]
  validations:
`)
	for range 15 {
		b.WriteString("  - expression: \"object.data.all(a, object.data.all(b, a != b || a == b)) || 'x'.replace('x', 'y') == ''\"\n")
	}
	for i := range 60 {
		fmt.Fprintf(&b, "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: slow-%d}\nspec: {policyName: slow.admitfn.io, validationActions: [Deny]}\n", i)
	}
	return b.String()
}

// WriteDir writes the bundle to a new directory and returns it.
func WriteDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "slow.yaml"), []byte(Bundle()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Data is the ConfigMap data that makes the review slow.
func Data() map[string]string {
	data := map[string]string{}
	for i := range Keys {
		data[fmt.Sprintf("k%03d", i)] = "v"
	}
	return data
}

// Review is an AdmissionReview v1 creating the ConfigMap Name with Data.
func Review(uid string) []byte {
	body, err := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"request": map[string]any{
			"uid":       uid,
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "configmaps"},
			"name":      Name,
			"namespace": "default",
			"operation": "CREATE",
			"userInfo":  map[string]any{"username": "alice"},
			"object": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": Name, "namespace": "default"},
				"data":     Data(),
			},
		},
	})
	if err != nil {
		panic(err)
	}
	return body
}
