package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// applyAt runs the CLI with a fixed clock (the reports' timestamps).
func applyAt(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	c := &cli{in: strings.NewReader(stdin), out: &out, err: &errb, getenv: func(string) string { return "" },
		now: func() time.Time { return time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) }}
	code = c.run(args)
	return code, out.String(), errb.String()
}

// Every output of apply on the example bundle and a directory of
// manifests (multi-document YAML, a JSON List, a Namespace with labels,
// two namespaces labelled by flag, a resource with no namespace, one in
// kube-system, a cluster-scoped one), against golden files.
func TestApplyOutputs(t *testing.T) {
	for _, tc := range []struct{ output, golden string }{
		{"table", "table.txt"}, {"json", "report.json"}, {"junit", "report.xml"}, {"policyreport", "policyreport.yaml"},
	} {
		code, out, errOut := applyAt("", "apply", "-p", "../../policies/examples", "-f", "testdata/apply/manifests",
			"--namespace-labels", "staging=environment=test", "--namespace-labels", "default=environment=dev", "-o", tc.output, "--show-patch")
		if code != 1 || errOut != "" {
			t.Errorf("-o %s: exit %d, stderr %q; want 1 (a resource is denied)", tc.output, code, errOut)
		}
		golden := filepath.Join("testdata", "apply", tc.golden)
		if *update {
			os.WriteFile(golden, []byte(out), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("-o %s differs from %s (go test ./cmd/admitfn -update rewrites it):\n%s", tc.output, golden, out)
		}
	}
	// --audit reports the same and exits 0.
	if code, _, _ := applyAt("", "apply", "-p", "../../policies/examples", "-f", "testdata/apply/manifests", "--audit"); code != 0 {
		t.Errorf("--audit: exit %d", code)
	}
}

// The PolicyReports pass the wgpolicyk8s.io/v1alpha2 CRDs' schema, as
// validators generated from them check it (hack/policyreport).
func TestPolicyReportsMatchTheCRD(t *testing.T) {
	dir := os.Getenv("ADMITFN_POLICYREPORT_VALIDATOR")
	if dir == "" {
		if os.Getenv("ADMITFN_STORE_TESTS") == "required" {
			t.Fatal("ADMITFN_POLICYREPORT_VALIDATOR is not set: make unit installs the validator")
		}
		t.Skip("ADMITFN_POLICYREPORT_VALIDATOR is not set (make unit sets it)")
	}
	_, out, _ := applyAt("", "apply", "-p", "../../policies/examples", "-f", "testdata/apply/manifests", "--namespace-labels", "staging=environment=test", "-o", "json")
	var report struct{ Resources []resourceResult }
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	// A cluster-scoped resource too, for a ClusterPolicyReport.
	for _, r := range report.Resources {
		if r.Resource.Namespace == "production" && len(r.Results) > 0 {
			r.Resource.Namespace = ""
			report.Resources = append(report.Resources, r)
			break
		}
	}
	reports := policyReports(report.Resources, time.Now(), defaultDeployment)
	bad := reports[len(reports)-1]
	bad.Results = append([]reportResult(nil), bad.Results...)
	bad.Results[0].Result = "denied" // not a result the CRD allows
	bad.Metadata.Name = "broken"
	for _, tc := range []struct {
		reports []policyReport
		code    int
		want    string
	}{
		{reports, 0, "ok ClusterPolicyReport /admitfn\nok PolicyReport default/admitfn\nok PolicyReport production/admitfn\n"},
		{[]policyReport{bad}, 1, "invalid PolicyReport production/broken: data/results/0/result must be equal to one of the allowed values\n"},
	} {
		raw, _ := json.Marshal(tc.reports)
		cmd := exec.Command("node", filepath.Join(dir, "validate.mjs"))
		cmd.Stdin = bytes.NewReader(raw)
		got, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || string(got) != tc.want {
			t.Errorf("validate.mjs: exit %d\n%s\nwant exit %d\n%s", code, got, tc.code, tc.want)
		}
	}
}

func TestApplyInput(t *testing.T) {
	selective := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(selective, []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: two.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - {expression: object.spec.replicas >= 2, message: at least two replicas}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: two}
spec:
  policyName: two.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
`), 0o644)
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: production}\nspec: {replicas: 1}\n"
	const unlabelled = "warning: binding two: namespaceSelector \"env=prod\" matched without the labels of namespace qa (no Namespace object in the input, no --namespace-labels): it may apply where the cluster would not, or not where it would\n"
	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		stdout      string // a line the output must hold
		stderr      string
	}{
		{"stdin, multi-document", "---\n# a comment\n" + deploy + "---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: production, labels: {environment: production}}\n", []string{"-f", "-"}, 1,
			"DENIED    Deployment production/api  CREATE     <stdin>:3\n", ""},
		{"bad YAML names the file and line", deploy + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n", []string{"-f", "-"}, 1,
			"", "admitfn apply: <stdin>:8: invalid YAML: did not find expected ',' or '}'\n"},
		{"bad YAML after a comment: the file's line", deploy + "---\n\n# config\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n", []string{"-f", "-"}, 1,
			"", "admitfn apply: <stdin>:10: invalid YAML: did not find expected ',' or '}'\n"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"-f", "-"}, 1,
			"", "admitfn apply: <stdin>:1: not a Kubernetes object: apiVersion and kind are required\n"},
		{"a List item without kind", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, metadata: {name: x}}\n", []string{"-f", "-"}, 1,
			"", "admitfn apply: <stdin>:1: List items[0]: not a Kubernetes object: apiVersion and kind are required\n"},
		{"a YAML 1.1 boolean", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags, namespace: shop}\ndata: {enabled: y}\n", []string{"-f", "-"}, 1,
			"ERROR     ConfigMap shop/flags  CREATE     <stdin>:1\n  input error: not a valid ConfigMap: cannot unmarshal bool into Go struct field ConfigMap.data of type string (quote YAML 1.1 booleans such as y, yes, on)\n", ""},
		{"a scalar", "just text\n", []string{"-f", "-"}, 1,
			"", "admitfn apply: <stdin>:1: not a Kubernetes object: want a map with apiVersion and kind\n"},
		{"missing file", "", []string{"-f", "testdata/apply/none.yaml"}, 1, "", "admitfn apply: testdata/apply/none.yaml: no such file or directory\n"},
		{"no resources", "# nothing\n", []string{"-f", "-"}, 1, "", "admitfn apply: no resources in -\n"},
		{"no -f", "", nil, 2, "", "admitfn apply: name the resources with -f/--filename: a file, a directory, or - for standard input (or audit a cluster with --cluster)\n"},
		{"-f and --cluster", "", []string{"-f", "-", "--cluster"}, 2, "", "admitfn apply: --cluster reviews what the cluster holds: it takes no -f/--filename\n"},
		{"cluster flags without --cluster", "", []string{"-f", "-", "-A"}, 2, "", "admitfn apply: -A/--all-namespaces, --write-reports, --kubeconfig and --context need --cluster\n"},
		{"a report name that is no object name", "", []string{"-f", "-", "--deployment", "Bad_Name"}, 2, "", "admitfn apply: --deployment \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')\nRun 'admitfn apply --help' for usage.\n"},
		{"a kubeconfig that is not there", "", []string{"--cluster", "--kubeconfig", "testdata/apply/none"}, 1, "", "admitfn apply: kubeconfig: stat testdata/apply/none: no such file or directory\n"},
		{"bad namespace labels", "", []string{"-f", "-", "--namespace-labels", "prod"}, 2, "", "admitfn apply: --namespace-labels \"prod\": want NS=KEY=VALUE[,KEY=VALUE...]\n"},
		{"labels by flag select the binding", strings.Replace(deploy, "production", "qa", 1), []string{"-p", selective, "-f", "-", "--namespace-labels", "qa=env=prod,tier=web"}, 1,
			"DENIED    Deployment qa/api  CREATE     <stdin>:1\n  fail  two.example.com two/validations[0]: at least two replicas\n", ""},
		// As helm template prints it: a namespace the input does not
		// define. The binding is left out, and apply says so.
		{"no labels, no match", strings.Replace(deploy, "production", "qa", 1), []string{"-p", selective, "-f", "-"}, 0,
			"ALLOWED   Deployment qa/api  CREATE     <stdin>:1\n1 resource: 1 allowed, 0 denied, 0 errors, 0 skipped; results: 0 pass, 0 fail, 0 warn, 0 error\n", unlabelled},
		{"no labels, --strict", strings.Replace(deploy, "production", "qa", 1), []string{"-p", selective, "-f", "-", "--strict"}, 1,
			"", unlabelled + "admitfn apply: --strict: 1 binding(s) matched without namespace labels: give them with Namespace objects or --namespace-labels\n"},
		{"labels given, --strict", strings.Replace(deploy, "production", "qa", 1), []string{"-p", selective, "-f", "-", "--strict", "--namespace-labels", "qa=env=dev"}, 0,
			"ALLOWED   Deployment qa/api  CREATE     <stdin>:1\n", ""},
		{"no labels, a binding of another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: qa}\n", []string{"-p", selective, "-f", "-", "--strict"}, 0,
			"ALLOWED   ConfigMap qa/c  CREATE     <stdin>:1\n", ""},
		{"a Namespace in the input labels it", "apiVersion: v1\nkind: Namespace\nmetadata: {name: production, labels: {env: prod}}\n---\n" + deploy, []string{"-p", selective, "-f", "-"}, 1,
			"DENIED    Deployment production/api  CREATE     <stdin>:5\n", ""},
		{"the flag wins over the input", "apiVersion: v1\nkind: Namespace\nmetadata: {name: production, labels: {env: prod}}\n---\n" + deploy, []string{"-p", selective, "-f", "-", "--namespace-labels", "production=env=dev"}, 0,
			"ALLOWED   Deployment production/api  CREATE     <stdin>:5\n", ""},
		{"the default namespace", strings.Replace(deploy, "namespace: production", "labels: {}", 1), []string{"-p", selective, "-f", "-", "-n", "shop", "--namespace-labels", "shop=env=prod"}, 1,
			"DENIED    Deployment shop/api  CREATE     <stdin>:1\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"apply"}, tc.args...)
			if !slices.Contains(args, "-p") {
				args = append(args, "-p", "../../policies/examples")
			}
			code, out, errOut := applyAt(tc.stdin, args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || errOut != tc.stderr && !(tc.code == 2 && strings.HasPrefix(errOut, tc.stderr)) {
				t.Errorf("exit %d, stdout:\n%s\nstderr %q\nwant exit %d, %q, stderr %q", code, out, errOut, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// --old-filename makes the review an UPDATE from the previous version:
// a policy on UPDATE sees oldObject.
func TestApplyUpdate(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "policy.yaml")
	os.WriteFile(bundle, []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-shrink.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}]
  validations:
  - expression: object.spec.replicas >= oldObject.spec.replicas
    message: replicas may not shrink
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-shrink}
spec: {policyName: no-shrink.example.com, validationActions: [Deny]}
`), 0o644)
	old := filepath.Join(dir, "old.yaml")
	os.WriteFile(old, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec: {replicas: 3}\n"), 0o644)
	now := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec: {replicas: 2}\n"
	code, out, _ := applyAt(now, "apply", "-p", bundle, "-f", "-", "--old-filename", old)
	want := "DECISION  RESOURCE             OPERATION  SOURCE\nDENIED    Deployment shop/api  UPDATE     <stdin>:1\n  fail  no-shrink.example.com no-shrink/validations[0]: replicas may not shrink\n1 resource: 0 allowed, 1 denied, 0 errors, 0 skipped; results: 0 pass, 1 fail, 0 warn, 0 error\n"
	if code != 1 || out != want {
		t.Errorf("exit %d\n%s\nwant\n%s", code, out, want)
	}
	// Without the old version it is a CREATE, which the policy does not
	// match.
	code, out, _ = applyAt(now, "apply", "-p", bundle, "-f", "-")
	if want := "DECISION  RESOURCE             OPERATION  SOURCE\nALLOWED   Deployment shop/api  CREATE     <stdin>:1\n1 resource: 1 allowed, 0 denied, 0 errors, 0 skipped; results: 0 pass, 0 fail, 0 warn, 0 error\n"; code != 0 || out != want {
		t.Errorf("exit %d\n%s\nwant\n%s", code, out, want)
	}
}

// On a terminal, apply shows how many resources it has reviewed and
// clears the line when done; into a pipe it writes nothing there.
func TestApplyProgress(t *testing.T) {
	dump := writeDump(t, 1000)
	run := func(stderr io.Writer) int {
		c := &cli{in: strings.NewReader(""), out: io.Discard, err: stderr, getenv: func(string) string { return "" }, now: time.Now}
		return c.run([]string{"apply", "-p", "../../policies/examples", "-f", dump, "--audit"})
	}
	tty, read := pty(t)
	if code := run(tty); code != 0 {
		t.Fatalf("exit %d", code)
	}
	tty.Close()
	out := read()
	if !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("the progress line is not cleared at the end: %q", out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\r\x1b[K"), "\r")[1:] {
		if !regexp.MustCompile(`^reviewed \d+ of 1000 resources$`).MatchString(line) {
			t.Errorf("progress line %q", line)
		}
	}
	var pipe bytes.Buffer
	if code := run(&pipe); code != 0 || pipe.Len() != 0 {
		t.Errorf("into a pipe: exit %d, %q", code, pipe.String())
	}
}

// --cluster with no kubeconfig anywhere says where one is looked for, not
// client-go's KUBERNETES_MASTER hint.
func TestApplyWithoutKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	code, out, errOut := applyAt("", "apply", "-p", "../../policies/examples", "--cluster")
	if want := "admitfn apply: kubeconfig: none found: name one with --kubeconfig, or set KUBECONFIG, or write ~/.kube/config\n"; code != 1 || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, %q", code, out, errOut, want)
	}
}

// In a directory, a file of YAML that is no Kubernetes object (a
// kustomization.yaml without kind) is skipped with a warning; named, it is
// an error.
func TestApplySkipsOtherYAMLInDirectories(t *testing.T) {
	dir := t.TempDir()
	kustomization := filepath.Join(dir, "kustomization.yaml")
	os.WriteFile(kustomization, []byte("resources: [deploy.yaml]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "deploy.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"), 0o644)
	code, out, errOut := applyAt("", "apply", "-p", "../../policies/examples", "-f", dir)
	if want := "warning: skipped " + kustomization + ":1: not a Kubernetes object: apiVersion and kind are required\n"; code != 0 || !strings.Contains(out, "ALLOWED   ConfigMap shop/c  CREATE     "+filepath.Join(dir, "deploy.yaml")+":1") || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
	}
	code, _, errOut = applyAt("", "apply", "-p", "../../policies/examples", "-f", kustomization)
	if want := "admitfn apply: " + kustomization + ":1: not a Kubernetes object: apiVersion and kind are required\n"; code != 1 || errOut != want {
		t.Errorf("named: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}

// Several bundles are reviewed together, as a cluster holds them all: each
// one's policies act on the same resource; a file two bundles share is
// refused, as an object two bundles define.
func TestApplySeveralBundles(t *testing.T) {
	dir, platform, team := twoBundles(t)
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec: {containers: [{name: web, image: 'nginx:latest'}]}\n"

	code, out, errOut := applyAt(pod, "apply", "-p", platform, "-p", team, "-f", "-")
	want := `DECISION  RESOURCE      OPERATION  SOURCE
DENIED    Pod shop/web  CREATE     <stdin>:1
  fail  platform.example.com platform/validations[0]: no latest
  fail  team.example.com team/validations[0]: labels please
1 resource: 0 allowed, 1 denied, 0 errors, 0 skipped; results: 0 pass, 2 fail, 0 warn, 0 error
`
	if code != 1 || out != want || errOut != "" {
		t.Errorf("exit %d, stderr %q\n%s\nwant\n%s", code, errOut, out, want)
	}
	// One bundle alone: only its policy acts.
	if code, out, _ := applyAt(pod, "apply", "-p", team, "-f", "-"); code != 1 || strings.Contains(out, "platform") || !strings.Contains(out, "labels please") {
		t.Errorf("one bundle: exit %d\n%s", code, out)
	}
	// The same bundle twice, or a file of one inside another.
	for _, second := range []string{team + "/", filepath.Join(team, "policy.yaml")} {
		code, _, errOut := applyAt(pod, "apply", "-p", team, "-p", second, "-f", "-")
		want := "admitfn apply: -p/--policies: " + filepath.ToSlash(filepath.Join(team, "policy.yaml")) + " is in both " + team + " and " + second + "\n"
		if code != 2 || !strings.HasPrefix(errOut, want) {
			t.Errorf("-p %s -p %s: exit %d, %q, want %q", team, second, code, errOut, want)
		}
	}
	// An object two bundles define, in different files.
	copyDir := filepath.Join(dir, "copy")
	os.MkdirAll(copyDir, 0o755)
	data, _ := os.ReadFile(filepath.Join(team, "policy.yaml"))
	os.WriteFile(filepath.Join(copyDir, "again.yaml"), data, 0o644)
	code, _, errOut = applyAt(pod, "apply", "-p", team, "-p", copyDir, "-f", "-")
	if want := filepath.ToSlash(filepath.Join(team, "policy.yaml")) + `: document 1: ValidatingAdmissionPolicy "team.example.com" is already defined at ` + filepath.ToSlash(filepath.Join(copyDir, "again.yaml")) + ": document 1\n"; code != 1 || !strings.Contains(errOut, want) || !strings.HasPrefix(errOut, "admitfn apply: bundles "+team+", "+copyDir+": ") {
		t.Errorf("an object in two bundles: exit %d, %q", code, errOut)
	}
}

// twoBundles writes two bundles of one Pod policy each, under dir:
// platform denies :latest images, team wants labels.
func twoBundles(t *testing.T) (dir, platform, team string) {
	t.Helper()
	dir = t.TempDir()
	bundle := func(name, expr, message string) string {
		path := filepath.Join(dir, name)
		os.MkdirAll(path, 0o755)
		os.WriteFile(filepath.Join(path, "policy.yaml"), []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: `+name+`.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations: [{expression: "`+expr+`", message: `+message+`}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: `+name+`}
spec: {policyName: `+name+`.example.com, validationActions: [Deny]}
`), 0o644)
		return path
	}
	return dir, bundle("platform", "!object.spec.containers.exists(c, c.image.endsWith(':latest'))", "no latest"), bundle("team", "has(object.metadata.labels)", "labels please")
}

// --exclude-namespace skips what render's webhooks would not send, in
// apply and in test, as kube-system is; a name no namespace has is a usage
// error.
func TestExcludeNamespace(t *testing.T) {
	_, platform, _ := twoBundles(t)
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: admitfn-system}\nspec: {containers: [{name: web, image: 'nginx:latest'}]}\n"
	code, out, _ := applyAt(pod, "apply", "-p", platform, "-f", "-", "--exclude-namespace", "admitfn-system")
	if want := "DECISION  RESOURCE                OPERATION  SOURCE\nSKIPPED   Pod admitfn-system/web  CREATE     <stdin>:1\n1 resource: 0 allowed, 0 denied, 0 errors, 1 skipped; results: 0 pass, 0 fail, 0 warn, 0 error\n"; code != 0 || out != want {
		t.Errorf("excluded: exit %d\n%s\nwant\n%s", code, out, want)
	}
	if code, out, _ := applyAt(pod, "apply", "-p", platform, "-f", "-", "--exclude-namespace", "admitfn-system", "-o", "junit"); code != 0 || !strings.Contains(out, `<skipped message="namespace admitfn-system is not sent to the webhooks">`) {
		t.Errorf("junit: exit %d\n%s", code, out)
	}
	if code, _, _ := applyAt(pod, "apply", "-p", platform, "-f", "-"); code != 1 {
		t.Errorf("not excluded: exit %d, want the denial", code)
	}
	if code, _, errOut := applyAt(pod, "apply", "-p", platform, "-f", "-", "--exclude-namespace", "Admitfn"); code != 2 || !strings.HasPrefix(errOut, `admitfn apply: --exclude-namespace: namespace "Admitfn": a lowercase RFC 1123 label`) {
		t.Errorf("a bad name: exit %d %q", code, errOut)
	}

	tests := filepath.Join(t.TempDir(), "x_test.yaml")
	os.WriteFile(tests, []byte("policies: "+platform+"\ncases:\n- name: excluded\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: admitfn-system}, spec: {containers: [{name: a, image: 'nginx:latest'}]}}\n  expect: {allowed: true}\n"), 0o644)
	if code, out, _ := applyAt("", "test", tests, "--exclude-namespace", "admitfn-system"); code != 0 || !strings.Contains(out, "ok   "+tests+": excluded\n") {
		t.Errorf("test --exclude-namespace: exit %d\n%s", code, out)
	}
	if code, out, _ := applyAt("", "test", tests); code != 1 || !strings.Contains(out, "FAIL "+tests+": excluded\n") {
		t.Errorf("test without it: exit %d\n%s", code, out)
	}
}
