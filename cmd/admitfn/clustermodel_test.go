package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const clusterModel = "testdata/clustermodel/"

// One model of the cluster: the same Deployment in a tier=system namespace,
// under a policy that reads namespaceObject's labels, is decided alike by
// apply -f with the Namespace in its input (or its labels by flag) and by
// test with the namespace under cluster: or namespaces:; without the
// namespace, apply says what it decided without, and --strict fails.
func TestOneModelOfTheCluster(t *testing.T) {
	p, deploy, ns := clusterModel+"policy.yaml", clusterModel+"deployment.yaml", clusterModel+"namespace.yaml"
	decision := func(args ...string) (int, string, string) {
		code, out, errOut := applyAt("", append([]string{"apply", "-p", p, "-o", "json"}, args...)...)
		var report struct {
			Resources []struct {
				Resource struct{ Kind string }
				Decision string
				Message  string
			}
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			return code, "unreadable: " + out, errOut
		}
		for _, r := range report.Resources {
			if r.Resource.Kind == "Deployment" {
				return code, r.Decision + " " + r.Message, errOut
			}
		}
		return code, "no Deployment", errOut
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"the Namespace in the input", []string{"-f", deploy, "-f", ns}},
		{"its labels by flag", []string{"-f", deploy, "--namespace-labels", "infra=tier=system"}},
	} {
		if code, got, errOut := decision(tc.args...); code != 0 || got != "allowed " || errOut != "" {
			t.Errorf("%s: exit %d, %q, stderr %q; want allowed, no warning", tc.name, code, got, errOut)
		}
	}
	code, got, errOut := decision("-f", deploy)
	if want := "denied ValidatingAdmissionPolicy 'replicas-outside-system' with binding 'replicas-outside-system' denied request: at most 3 replicas outside system namespaces; infra is not one"; code != 1 || got != want {
		t.Errorf("without the namespace: exit %d, %q; want 1, %q", code, got, want)
	}
	if want := "warning: binding replicas-outside-system (policy replicas-outside-system) reads namespaceObject.metadata.labels of namespace infra (no Namespace object in the input, no --namespace-labels or --namespace-annotations), which apply -f does not have: it decides as a function without cluster access does (docs/differences.md); apply --cluster reads them\n"; errOut != want {
		t.Errorf("without the namespace: stderr %q, want %q", errOut, want)
	}
	if code, _, errOut := applyAt("", "apply", "-p", p, "-f", deploy, "--strict"); code != 2 && code != 1 || !strings.Contains(errOut, "--strict: 1 binding(s) read what apply -f does not have") {
		t.Errorf("--strict without the namespace: exit %d, stderr %q", code, errOut)
	}
	// test, with the namespace under cluster: and under namespaces:, the
	// same decisions (each file expects them exactly).
	for _, f := range []string{"cluster_test.yaml", "namespaces_test.yaml"} {
		if code, out, errOut := applyAt("", "test", clusterModel+"tests/"+f); code != 0 {
			t.Errorf("test %s: exit %d\n%s%s", f, code, out, errOut)
		}
	}
}

// render without --cluster names the bindings that read the cluster, and
// --strict fails; with --cluster it says nothing of them.
func TestRenderNamesClusterReads(t *testing.T) {
	args := []string{"render", "-p", clusterModel + "policy.yaml", "--url", "https://fn.example.com", "-q"}
	want := "warning: binding replicas-outside-system (policy replicas-outside-system) reads namespaceObject.metadata.labels: rendered without --cluster, the function decides it without cluster access (docs/differences.md)\n"
	if code, _, errOut := applyAt("", args...); code != 0 || errOut != want {
		t.Errorf("render: exit %d, stderr %q; want 0, %q", code, errOut, want)
	}
	if code, out, errOut := applyAt("", append(args, "--strict")...); code == 0 || out != "" || !strings.HasSuffix(errOut, "--strict: 1 binding(s) read the cluster\n") {
		t.Errorf("render --strict: exit %d, stdout %d bytes, stderr %q", code, len(out), errOut)
	}
	if code, _, errOut := applyAt("", append(args, "--cluster", "prod")...); code != 0 || errOut != "" {
		t.Errorf("render --cluster: exit %d, stderr %q", code, errOut)
	}
}

// apply and test reinvoke as kube-apiserver does: the upstream counters
// (two IfNeeded policies, one Never) count to 5 whatever the order of the
// bundle's files.
func TestCLIReinvocationInAnyFileOrder(t *testing.T) {
	counter := func(name, rp string) string {
		return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  reinvocationPolicy: %[2]s
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{annotations: {"count": string(int(object.metadata.?annotations["count"].orValue("0")) + 1)}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec: {policyName: %[1]s}
`, name, rp)
	}
	docs := []string{counter("c-never", "Never"), counter("a-ifneeded", "IfNeeded"), counter("b-ifneeded", "IfNeeded")}
	cm := filepath.Join(t.TempDir(), "cm.yaml")
	os.WriteFile(cm, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: count, namespace: default}\n"), 0o644)
	for _, perm := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		dir := t.TempDir()
		for pos, d := range perm {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.yaml", pos)), []byte(docs[d]), 0o644)
		}
		code, out, errOut := applyAt("", "apply", "-p", dir, "-f", cm, "-o", "json")
		var report struct {
			Resources []struct {
				Patch []struct {
					Op, Path string
					Value    map[string]string
				}
			}
		}
		json.Unmarshal([]byte(out), &report)
		if code != 0 || len(report.Resources) != 1 || fmt.Sprint(report.Resources[0].Patch) != "[{add /metadata/annotations map[count:5]}]" {
			t.Errorf("files in order %v: exit %d, %s%s; want the count at 5", perm, code, out, errOut)
		}
	}
}

// apply -f reads a namespace's annotations from --namespace-annotations for
// namespaceObject, and names a binding that asks the authorizer (which
// apply -f does not have: the check fails as without cluster access).
func TestApplyNamespaceAnnotationsAndAuthorizer(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: owned}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "namespaceObject.metadata.?annotations[?'owner'].orValue('') == 'team-a'"
    message: the namespace is not team-a's
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: owned}
spec: {policyName: owned, validationActions: [Deny]}
---
`+approversPolicy("Ignore")), 0o644)
	cm := filepath.Join(t.TempDir(), "cm.yaml")
	os.WriteFile(cm, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"), 0o644)
	authzWarning := "warning: binding approvers (policy approvers) reads authorizer, which apply -f does not have: it decides as a function without cluster access does (docs/differences.md); apply --cluster reads them\n"
	code, out, errOut := applyAt("", "apply", "-p", dir, "-f", cm, "--namespace-annotations", "shop=owner=team-a")
	if code != 0 || errOut != authzWarning || !strings.Contains(out, "ALLOWED") {
		t.Errorf("owned by team-a: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, _ = applyAt("", "apply", "-p", dir, "-f", cm, "--namespace-annotations", "shop=owner=team-b")
	if code != 1 || !strings.Contains(out, "the namespace is not team-a's") {
		t.Errorf("owned by team-b: exit %d\n%s", code, out)
	}
}

// A test file's namespaces: describes a cluster, as cluster.namespaces:
// the authorizer answers by the file's rules (none: denied) rather than
// failing as it does for a function without cluster access.
func TestTestFileNamespacesDescribeACluster(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(approversPolicy("Fail")), 0o644)
	os.WriteFile(filepath.Join(dir, "p_test.yaml"), []byte(`namespaces:
  shop: {env: prod}
cases:
- name: denied by the authorizer, not failed
  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: shop}}
  expect: {allowed: false, message: "ValidatingAdmissionPolicy 'approvers' with binding 'approvers' denied request: approvers only"}
`), 0o644)
	if code, out, errOut := applyAt("", "test", dir); code != 0 {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// approversPolicy denies ConfigMaps unless the authorizer allows the
// requester to approve them ("approvers only"), under failurePolicy fp.
func approversPolicy(fp string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: approvers}
spec:
  failurePolicy: ` + fp + `
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "authorizer.group('').resource('configmaps').check('approve').allowed()"
    message: approvers only
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: approvers}
spec: {policyName: approvers, validationActions: [Deny]}
`
}
