package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLintCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"lint", "testdata/lint"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1: %s", code, stderr.String())
	}
	want := `testdata/lint/policy.yaml: document 1: error: ValidatingAdmissionPolicy replicas.lint.admitfn.io: spec.validations[0].expression: apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'
   | object.spec.replicaz <= 3
   | ...........^
testdata/lint/policy.yaml: document 1: warning: ValidatingAdmissionPolicy replicas.lint.admitfn.io: spec.validations[1].expression: namespaceObject.metadata.labels: a function is not sent the namespace, so namespaceObject holds only metadata.name; select on namespace labels with the binding's namespaceSelector
1 error, 1 warning
`
	if stdout.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", stdout.String(), want)
	}

	// Warnings alone pass; a bundle that does not load fails.
	stdout.Reset()
	if code := run([]string{"lint", "../../policies/examples", "../../policies/library/pod-security"}, &stdout, &stderr); code != 0 || !strings.HasSuffix(stdout.String(), "0 errors, 2 warnings\n") {
		t.Errorf("examples: exit %d\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"lint", "testdata/nonexistent"}, &stdout, &stderr); code != 1 || stdout.String() != "testdata/nonexistent: error: no such file or directory\n1 error, 0 warnings\n" {
		t.Errorf("missing bundle: exit %d\n%s", code, stdout.String())
	}
	if code := run([]string{"lint"}, &stdout, &stderr); code != 2 {
		t.Errorf("no args: exit %d", code)
	}
}

// Every problem of a bundle that does not load is listed and counted.
func TestLintCountsEveryLoadError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations:
  - expression: 'object.spec +'
  - expression: 'nope'
  - expression: 'object.metadata.name +'
`), 0o644)
	var stdout, stderr bytes.Buffer
	code := run([]string{"lint", dir}, &stdout, &stderr)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if code != 1 || lines[len(lines)-1] != "3 errors, 0 warnings" || strings.Count(stdout.String(), filepath.Join(dir, "p.yaml")+": document 1: error: policy p: spec.validations[") != 3 {
		t.Errorf("exit %d\n%s", code, stdout.String())
	}
}

// A field typo does not hide an expression that does not compile
// elsewhere, nor a failure of validation: lint lists them all at once, each
// at its file, document and line, in every format; the rules still check
// what loaded.
func TestLintListsEveryLoadErrorWhereItIs(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: a.example.com}
spec:
  failurePolicy: Fial
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: a}
spec: {policyName: a.example.com, validationActions: [Deny]}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(`# two policies
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: b.example.com}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expresion: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: c.example.com}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "object.nope("}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: d.example.com}
spec:
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]}
  validations: [{expression: "true"}]
`), 0o644)
	code, out, _ := admitfn("lint", dir, "-o", "json")
	var report struct {
		Errors, Warnings int
		Findings         []finding
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	type where struct {
		rule, file   string
		doc, line    int
		messageStart string
	}
	want := []where{
		{"load", "b.yaml", 1, 2, `ValidatingAdmissionPolicy: unknown field "spec.validations[0].expresion"`},
		{"load", "a.yaml", 1, 1, `policy a.example.com: spec.failurePolicy: Unsupported value: "Fial"`},
		{"load", "b.yaml", 2, 9, `policy c.example.com: spec.validations[0].expression: compilation failed: ERROR: <input>:1:13: Syntax error`},
		{"unchecked-rule", "b.yaml", 3, 16, ``},
	}
	var got []where
	for _, f := range report.Findings {
		w := where{f.Rule, strings.TrimPrefix(f.File, dir+string(filepath.Separator)), f.Document, f.Line, ""}
		for _, m := range want {
			if strings.HasPrefix(f.Message, m.messageStart) && m.rule == f.Rule {
				w.messageStart = m.messageStart
			}
		}
		got = append(got, w)
	}
	if code != 1 || report.Errors != 3 || report.Warnings != 1 || !slices.Equal(got, want) {
		t.Errorf("exit %d, %d errors, %d warnings\n%+v\nwant\n%+v\n%s", code, report.Errors, report.Warnings, got, want, out)
	}
	// SARIF: every finding has its region.
	_, out, _ = admitfn("lint", dir, "-o", "sarif")
	var sarif struct {
		Runs []struct {
			Results []struct {
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &sarif); err != nil || len(sarif.Runs) != 1 || len(sarif.Runs[0].Results) != 4 {
		t.Fatalf("sarif: %v\n%s", err, out)
	}
	for i, r := range sarif.Runs[0].Results {
		if len(r.Locations) != 1 || r.Locations[0].PhysicalLocation.Region.StartLine != want[i].line || !strings.HasSuffix(r.Locations[0].PhysicalLocation.ArtifactLocation.URI, want[i].file) {
			t.Errorf("sarif result %d: %+v, want %s line %d", i, r.Locations, want[i].file, want[i].line)
		}
	}
}

// --kubernetes-version names the oldest cluster an expression must suit,
// from the first with ValidatingAdmissionPolicy GA to the one admitfn
// tracks.
func TestLintKubernetesVersion(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: names.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.template.spec.containers.all(i, c, c.name != '')"
`), 0o644)
	code, out, _ := admitfn("lint", dir, "--kubernetes-version", "1.32")
	if want := filepath.Join(dir, "p.yaml") + ": document 1: warning: ValidatingAdmissionPolicy names.example.com: spec.validations[0].expression: Kubernetes 1.32 refuses it (compilation failed: ERROR: <input>:1:41: undeclared reference to 'all' (in container '')); it needs 1.33 or later\n0 errors, 1 warning\n"; code != 0 || out != want {
		t.Errorf("1.32: exit %d\n%s\nwant\n%s", code, out, want)
	}
	if code, out, _ := admitfn("lint", dir, "--kubernetes-version", "1.33"); code != 0 || out != "0 errors, 0 warnings\n" {
		t.Errorf("1.33: exit %d\n%s", code, out)
	}
	for _, v := range []string{"1.29", "1.38", "one"} {
		if code, _, errOut := admitfn("lint", dir, "--kubernetes-version", v); code != 2 || !strings.HasPrefix(errOut, "admitfn lint: --kubernetes-version \""+v+"\": want a version from 1.30 to 1.37\n") {
			t.Errorf("%s: exit %d, %q", v, code, errOut)
		}
	}
}
