package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/doccheck"
)

const testOutput = `ok   testdata/tests/bundle/replicas_test.yaml: five replicas in prod are denied
ok   testdata/tests/bundle/replicas_test.yaml: five replicas elsewhere are allowed
ok   testdata/tests/bundle/replicas_test.yaml: two replicas in prod are annotated and labelled
ok   testdata/tests/bundle/replicas_test.yaml: kube-system is not sent to the webhooks
FAIL testdata/tests/failing/wrong_test.yaml: wrong expectations
       allowed: got true, want false
       message:
         got:  ""
         want: "denied"
       warnings:
         got:  none
         want: ["careful"]
       auditAnnotations:
         got:  {"replicas.test.admitfn.io_replicas":"2"}
         want: none
       object.kind: got "Deployment", want it absent
       object.metadata.labels.owner: got "alice", want "bob"
       object.metadata.labels.team: missing, want "x"
       object.spec.replicas: got 2, want [2]
ok   testdata/tests/failing/wrong_test.yaml: right expectations
FAIL: 1 of 6 cases failed
`

func TestTestCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"test", "testdata/tests"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1; stderr %s", code, stderr.String())
	}
	if stdout.String() != testOutput {
		t.Errorf("output:\n%s\nwant:\n%s", stdout.String(), testOutput)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}

	// kube-system reaches the webhooks when the configuration says so.
	stdout.Reset()
	if code := run([]string{"test", "--include-kube-system", "--run", "kube-system", "testdata/tests"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stdout.String(), `object.metadata.labels: got {"owner":"alice"}, want it absent`) {
		t.Errorf("-include-kube-system: exit %d\n%s", code, stdout.String())
	}

	// -run selects cases by FILE/NAME.
	stdout.Reset()
	if code := run([]string{"test", "--run", "bundle/.*prod", "testdata/tests"}, &stdout, &stderr); code != 0 {
		t.Errorf("-run: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if want := "ok   testdata/tests/bundle/replicas_test.yaml: five replicas in prod are denied\nok   testdata/tests/bundle/replicas_test.yaml: two replicas in prod are annotated and labelled\nPASS: 2 cases\n"; stdout.String() != want {
		t.Errorf("-run output:\n%s", stdout.String())
	}

	// -o json for CI.
	stdout.Reset()
	if code := run([]string{"test", "-o", "json", "testdata/tests"}, &stdout, &stderr); code != 1 {
		t.Errorf("-o json: exit %d", code)
	}
	var report struct {
		Passed, Failed int
		Cases          []struct {
			File, Name string
			Passed     bool
			Failures   []string
			Outcome    struct {
				Allowed bool
				Message string
				Code    int32
				Object  map[string]any
			}
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout.String())
	}
	if report.Passed != 5 || report.Failed != 1 || len(report.Cases) != 6 {
		t.Fatalf("report %+v", report)
	}
	first := report.Cases[0]
	if first.File != "testdata/tests/bundle/replicas_test.yaml" || !first.Passed || first.Outcome.Allowed || first.Outcome.Code != 403 ||
		first.Outcome.Message != "ValidatingAdmissionPolicy 'replicas.test.admitfn.io' with binding 'replicas-prod' denied request: at most 3 replicas, got 5" {
		t.Errorf("first case %+v", first)
	}
	if wrong := report.Cases[4]; wrong.Passed || len(wrong.Failures) != 8 {
		t.Errorf("failing case %+v", wrong)
	}
}

func TestTestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Dir(p)
	}
	bundle, err := filepath.Abs("testdata/tests/bundle")
	if err != nil {
		t.Fatal(err)
	}
	deploy := "object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 1}}"
	for _, tc := range []struct {
		name, file, content string
		code                int
		inStderr            string
	}{
		{"unknown field", "a/x_test.yaml", "policies: " + bundle + "\ncases:\n- name: c\n  expect: {allowed: true, alowed: false}\n  " + deploy + "\n", 1, `x_test.yaml:3: cases[0] (c): unknown field "alowed"`},
		{"no allowed", "b/x_test.yaml", "policies: " + bundle + "\ncases:\n- name: c\n  expect: {}\n  " + deploy + "\n", 1, "x_test.yaml: cases[0] (c): expect.allowed is required"},
		{"no object", "c/x_test.yaml", "policies: " + bundle + "\ncases:\n- name: c\n  expect: {allowed: true}\n", 1, "x_test.yaml: cases[0] (c): CREATE needs object"},
		{"bad operation", "d/x_test.yaml", "policies: " + bundle + "\ncases:\n- name: c\n  operation: PATCH\n  expect: {allowed: true}\n  " + deploy + "\n", 1, `cases[0] (c): operation "PATCH": want CREATE, UPDATE, DELETE or CONNECT`},
		{"duplicate names", "e/x_test.yaml", "policies: " + bundle + "\ncases:\n- {name: c, expect: {allowed: true}, " + deploy + "}\n- {name: c, expect: {allowed: true}, " + deploy + "}\n", 1, `cases[1]: name "c" is used twice`},
		{"no cases", "f/x_test.yaml", "policies: " + bundle + "\n", 1, "x_test.yaml: no cases"},
		{"bad bundle", "g/x_test.yaml", "policies: /nonexistent\ncases:\n- name: c\n  expect: {allowed: true}\n  " + deploy + "\n", 1, "x_test.yaml: the file does not load\n       policies: bundle /nonexistent: no such file or directory\n"},
		{"unknown version", "i/x_test.yaml", "apiVersion: admitfn.io/v2\nkind: PolicyTest\npolicies: " + bundle + "\ncases:\n- name: c\n  expect: {allowed: true}\n  " + deploy + "\n", 1, `x_test.yaml: apiVersion "admitfn.io/v2", kind "PolicyTest": this admitfn reads apiVersion admitfn.io/v1alpha1, kind PolicyTest`},
		{"kind alone", "j/x_test.yaml", "kind: PolicyTest\npolicies: " + bundle + "\ncases:\n- name: c\n  expect: {allowed: true}\n  " + deploy + "\n", 1, `x_test.yaml: apiVersion "", kind "PolicyTest": this admitfn reads`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := write(tc.file, tc.content)
			var stdout, stderr bytes.Buffer
			code := run([]string{"test", d}, &stdout, &stderr)
			// The file fails on its own, reported with the cases.
			want := "FAIL " + filepath.Join(d, "x_test.yaml") + ": the file does not load\n       "
			if code != tc.code || !strings.HasPrefix(stdout.String(), want) || !strings.Contains(stdout.String(), tc.inStderr) ||
				!strings.HasSuffix(stdout.String(), "FAIL: 0 of 0 cases failed, 1 file did not load\n") || stderr.Len() > 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d with %q", code, stdout.String(), stderr.String(), tc.code, tc.inStderr)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"test", write("h/policy.yaml", "kind: Nothing\n")}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "admitfn test: no *_test.yaml files under ") {
		t.Errorf("no test files: exit %d %s", code, stderr.String())
	}
	if code := run([]string{"test", filepath.Join(dir, "nonexistent")}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "nonexistent: no such file or directory\n") {
		t.Errorf("missing path: exit %d %s", code, stderr.String())
	}
	if code := run([]string{"test"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "admitfn test: name at least one test file or directory: admitfn test policies/\n") {
		t.Errorf("no args: exit %d %s", code, stderr.String())
	}
	if code := run([]string{"test", "-o", "xml", "testdata/tests"}, &stdout, &stderr); code != 2 {
		t.Errorf("-o xml: exit %d", code)
	}
	if code := run([]string{"test", "--run", "nothing-matches", "testdata/tests"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), `no case matches --run "nothing-matches"`) {
		t.Errorf("-run without matches: exit %d %s", code, stderr.String())
	}
}

func TestLoaderSkipsTestFiles(t *testing.T) {
	// The bundle directory holds replicas_test.yaml: render must not read it.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"render", "-p", "testdata/tests/bundle", "--url", "https://fn.example.com"}, &stdout, &stderr); code != 0 {
		t.Errorf("render: exit %d %s", code, stderr.String())
	}
}

// A case in an undeclared namespace that a webhook then skips is warned
// about; an object that does not decode as its kind fails as an input
// error, not as a decision.
func TestTestCaseWarningsAndInputErrors(t *testing.T) {
	bundle, _ := filepath.Abs("testdata/tests/bundle")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x_test.yaml"), []byte("policies: "+bundle+`
cases:
- name: qa is not declared
  namespace: qa
  userInfo: {username: alice}
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 5}}
  expect: {allowed: true}
- name: a YAML 1.1 boolean
  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: flags}, data: {enabled: y}}
  expect: {allowed: true}
`), 0o644)
	var stdout, stderr bytes.Buffer
	code := run([]string{"test", dir}, &stdout, &stderr)
	f := filepath.Join(dir, "x_test.yaml")
	want := "ok   " + f + ": qa is not declared\n" +
		"       warning: namespace \"qa\" is not declared under namespaces: its only label is kubernetes.io/metadata.name, so the webhook /validate/4289ce6a1b is not called\n" +
		"FAIL " + f + ": a YAML 1.1 boolean\n" +
		"       input error in object: not a valid ConfigMap: cannot unmarshal bool into Go struct field ConfigMap.data of type string (quote YAML 1.1 booleans such as y, yes, on)\n" +
		"FAIL: 1 of 2 cases failed\n"
	if code != 1 || stdout.String() != want {
		t.Errorf("exit %d\n%s\nwant\n%s", code, stdout.String(), want)
	}
}

// shows checks docs/policies.md's one block marked for the calling test:
// its `$ admitfn …` line is shown, and what follows is what admitfn prints
// when run with args, strip taken out of its paths, exiting with code.
func shows(t *testing.T, shown string, args []string, strip string, code int) {
	t.Helper()
	b := doccheck.Find(t, "docs/policies.md", 1)[0]
	line, want, _ := strings.Cut(b.Text, "\n")
	if line != "$ "+shown {
		t.Fatalf("%s: the block shows %q, want %q", b, line, "$ "+shown)
	}
	var stdout, stderr bytes.Buffer
	exit := run(args, &stdout, &stderr)
	if got := strings.ReplaceAll(stdout.String(), strip, ""); exit != code || got != want {
		t.Errorf("exit %d; %s printed:\n%s\ndocs/policies.md shows:\n%s", exit, shown, got, want)
	}
}

// docs/policies.md's run of the example tests is what admitfn test prints.
func TestPoliciesDocExamples(t *testing.T) {
	shows(t, "admitfn test policies/examples", []string{"test", "../../policies/examples"}, "../../", 0)
}

// docs/policies.md's failing case is what admitfn test prints for
// testdata/shop.
func TestPoliciesDocFailingCase(t *testing.T) {
	shows(t, "admitfn test shop/", []string{"test", "testdata/shop/"}, "testdata/", 1)
}

// docs/policies.md's lint output is what admitfn lint prints for
// testdata/lint, with the page's policy name.
func TestPoliciesDocLint(t *testing.T) {
	dir := t.TempDir()
	writeRenamed(t, "testdata/lint/policy.yaml", filepath.Join(dir, "my-policies", "policy.yaml"), "replicas.lint.admitfn.io")
	shows(t, "admitfn lint -p my-policies", []string{"lint", "-p", filepath.Join(dir, "my-policies")}, dir+string(filepath.Separator), 1)
}

// writeRenamed copies a test bundle's file to dst, its policy named as the
// documentation names it: replicas.example.com.
func writeRenamed(t *testing.T, src, dst, name string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, bytes.ReplaceAll(data, []byte(name), []byte("replicas.example.com")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// docs/policies.md's annotated test file passes against the bundle it
// describes (testdata/tests/bundle, with the page's policy name).
func TestPoliciesDocTestFilePasses(t *testing.T) {
	file := doccheck.Find(t, "docs/policies.md", 1)[0]
	dir := t.TempDir()
	writeRenamed(t, "testdata/tests/bundle/policy.yaml", filepath.Join(dir, "policy.yaml"), "replicas.test.admitfn.io")
	if err := os.WriteFile(filepath.Join(dir, "replicas_test.yaml"), []byte(file.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"test", dir}, &stdout, &stderr); code != 0 || !strings.HasSuffix(stdout.String(), "PASS: 1 case\n") {
		t.Errorf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// docs/policies.md's five-minute walk-through: the files it writes, tested
// as it says, print what it shows.
func TestPoliciesDocWalkthrough(t *testing.T) {
	blocks := doccheck.Find(t, "docs/policies.md", 2) // the commands, their output
	script := blocks[0].Text
	dir := t.TempDir()
	files := regexp.MustCompile("(?s)cat > (\\S+) <<'EOF'\n(.*?)\nEOF\n").FindAllStringSubmatch(script, -1)
	if len(files) != 2 || !strings.HasPrefix(script, "mkdir -p my-policies\n") || !strings.HasSuffix(script, "EOF\ngo run ./cmd/admitfn test my-policies\n") {
		t.Fatalf("%s: not the two files and the test run of the walk-through", blocks[0])
	}
	for _, f := range files {
		p := filepath.Join(dir, f[1])
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f[2]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"test", filepath.Join(dir, "my-policies")}, &stdout, &stderr)
	if got := strings.ReplaceAll(stdout.String(), dir+string(filepath.Separator), ""); code != 0 || got != blocks[1].Text {
		t.Errorf("exit %d %s\n%s\nwant\n%s", code, stderr.String(), got, blocks[1].Text)
	}
}

// A test file states the cluster its cases run in: namespaces, the
// authorizer's answers and params, read as a function with cluster access
// reads them.
func TestTestFileStatesTheCluster(t *testing.T) {
	doc := doccheck.Find(t, "docs/policies.md", 1)[0]
	if data, err := os.ReadFile("testdata/cluster-tests/cluster_test.yaml"); err != nil || string(data) != doc.Text {
		t.Errorf("%s is not testdata/cluster-tests/cluster_test.yaml (%v)", doc, err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"test", "testdata/cluster-tests"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	want := `ok   testdata/cluster-tests/cluster_test.yaml: one replica in a prod namespace
ok   testdata/cluster-tests/cluster_test.yaml: one replica in dev
ok   testdata/cluster-tests/cluster_test.yaml: more than the cluster's limit
ok   testdata/cluster-tests/cluster_test.yaml: critical, by an SRE
ok   testdata/cluster-tests/cluster_test.yaml: critical, by anyone else
PASS: 5 cases
`
	if stdout.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", stdout.String(), want)
	}

	dir := t.TempDir()
	policies, err := os.ReadFile("testdata/cluster-tests/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "policies.yaml"), policies, 0o644)
	for _, tc := range []struct{ file, want string }{
		{"cluster:\n  namespaces:\n  - metadata: {name: a}\n  - metadata: {name: a}\ncases: [{name: x, object: {}, expect: {allowed: true}}]\n", `cluster.namespaces[1]: namespace "a" is given twice`},
		{"cluster:\n  params:\n  - {apiVersion: v1, kind: ConfigMap}\ncases: [{name: x, object: {}, expect: {allowed: true}}]\n", "cluster.params[0]: apiVersion, kind and metadata.name are required"},
		{"namespaces: {a: {env: x}}\ncluster:\n  namespaces:\n  - metadata: {name: a}\ncases: [{name: x, object: {}, expect: {allowed: true}}]\n", `namespace "a" is under both namespaces and cluster.namespaces: give it once, under cluster.namespaces`},
		{"cluster:\n  authorizer:\n  - {usr: alice}\ncases: [{name: x, object: {}, expect: {allowed: true}}]\n", `unknown field "usr"`},
	} {
		os.WriteFile(filepath.Join(dir, "bad_test.yaml"), []byte(tc.file), 0o644)
		stdout.Reset()
		stderr.Reset()
		if code := run([]string{"test", dir}, &stdout, &stderr); code != 1 || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%q: exit %d\n%s%s\nwant it to say %q", tc.file, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}

// admitfn init writes a bundle that admitfn test passes and admitfn lint
// finds nothing in, and overwrites nothing.
func TestInitScaffold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "policies")
	code, out, errOut := admitfn("init", dir, "--name", "team-label")
	if want := "wrote " + filepath.Join(dir, "team-label.yaml") + "\nwrote " + filepath.Join(dir, "team-label_test.yaml") + "\nnext: admitfn test " + dir + "\n"; code != 0 || out != want || errOut != "" {
		t.Fatalf("init: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	if code, out, _ := admitfn("test", dir); code != 0 || !strings.HasSuffix(out, "PASS: 2 cases\n") || strings.Count(out, "ok   ") != 2 {
		t.Errorf("test: exit %d\n%s", code, out)
	}
	if code, out, _ := admitfn("lint", dir); code != 0 || out != "0 errors, 0 warnings\n" {
		t.Errorf("lint: exit %d\n%s", code, out)
	}
	if code, _, errOut := admitfn("init", dir, "--name", "team-label"); code != 1 || errOut != "admitfn init: "+filepath.Join(dir, "team-label.yaml")+" exists: not overwriting it\n" {
		t.Errorf("again: exit %d, %q", code, errOut)
	}
	if code, _, errOut := admitfn("init", dir, "--name", "Team"); code != 2 || !strings.HasPrefix(errOut, "admitfn init: --name \"Team\": a lowercase RFC 1123 label") {
		t.Errorf("bad name: exit %d, %q", code, errOut)
	}
}

// docs/policies.md's in-cluster list is a bundle: lint finds nothing, and
// the policy denies what it denies in-cluster.
func TestPoliciesDocInCluster(t *testing.T) {
	b := doccheck.Find(t, "docs/policies.md", 1)[0]
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in-cluster.yaml"), []byte(b.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := admitfn("lint", dir); code != 0 || out != "0 errors, 0 warnings\n" {
		t.Errorf("lint: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ := applyAt("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec: {replicas: 6}\n", "apply", "-p", dir, "-f", "-")
	if code != 1 || !strings.Contains(out, "fail  max-replicas.example.com max-replicas/validations[0]: failed expression: object.spec.replicas <= 5\n") {
		t.Errorf("apply: exit %d\n%s", code, out)
	}
}

// A case takes its object from a manifest file, or its whole request from
// an AdmissionReview file, beside the test file.
func TestCasesFromFiles(t *testing.T) {
	dir := t.TempDir()
	review, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Abs("../../policies/examples")
	files := map[string]string{
		"review.json": string(review),
		"deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 7\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: \"nginx:1.27\"}]}\n",
		"two.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"files_test.yaml": `policies: ` + examples + `
namespaces:
  shop: {environment: test}
  production: {environment: production}
cases:
- name: a manifest from its file
  objectFile: deploy.yaml
  expect:
    allowed: false
    message: "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
- name: a review as kube-apiserver sends it
  reviewFile: review.json
  expect:
    allowed: false
    warnings: ["Validation failed for ValidatingAdmissionPolicy 'image-matches-environment.policy.example.com' with binding 'image-matches-environment-warn.example.com': only prod images are allowed in namespace production"]
`,
	}
	for name, text := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
	}
	code, out, _ := admitfn("test", filepath.Join(dir, "files_test.yaml"))
	if code != 0 || !strings.HasSuffix(out, "PASS: 2 cases\n") {
		t.Errorf("exit %d\n%s", code, out)
	}
	for _, tc := range []struct{ body, want string }{
		{"  objectFile: two.yaml\n", "objectFile two.yaml: want one object, found 2"},
		{"  objectFile: none.yaml\n", "objectFile: open " + filepath.Join(dir, "none.yaml") + ": no such file or directory"},
		{"  objectFile: deploy.yaml\n  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n", "objectFile and object: give one"},
		{"  reviewFile: review.json\n  operation: DELETE\n", "reviewFile is the whole request: give no operation, namespace, objects, resource, userInfo or dryRun beside it"},
	} {
		os.WriteFile(filepath.Join(dir, "bad_test.yaml"), []byte("policies: "+examples+"\ncases:\n- name: bad\n"+tc.body+"  expect: {allowed: true}\n"), 0o644)
		code, out, _ := admitfn("test", filepath.Join(dir, "bad_test.yaml"))
		if want := filepath.Join(dir, "bad_test.yaml") + ": cases[0] (bad): " + tc.want; code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d\n%s\nwant %q", code, out, want)
		}
	}
}

// A test file's policies may list several bundles, which its cases run
// against together; -p given several times does the same for every file.
func TestTestSeveralBundles(t *testing.T) {
	dir, platform, team := twoBundles(t)
	cases := `cases:
- name: latest is the platform's
  object: {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: shop, labels: {app: a}}, spec: {containers: [{name: a, image: 'nginx:latest'}]}}
  expect: {allowed: false, code: 422, message: "ValidatingAdmissionPolicy 'platform.example.com' with binding 'platform' denied request: no latest"}
- name: labels are the team's
  object: {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: shop}, spec: {containers: [{name: b, image: 'nginx:1.27'}]}}
  expect: {allowed: false, code: 422, message: "ValidatingAdmissionPolicy 'team.example.com' with binding 'team' denied request: labels please"}
- name: both pass
  object: {apiVersion: v1, kind: Pod, metadata: {name: c, namespace: shop, labels: {app: c}}, spec: {containers: [{name: c, image: 'nginx:1.27'}]}}
  expect: {allowed: true}
`
	tests := filepath.Join(dir, "tests")
	os.MkdirAll(tests, 0o755)
	listed := filepath.Join(tests, "listed_test.yaml")
	os.WriteFile(listed, []byte("policies: [../platform, ../team]\n"+cases), 0o644)
	var stdout, stderr bytes.Buffer
	want := "ok   " + listed + ": latest is the platform's\nok   " + listed + ": labels are the team's\nok   " + listed + ": both pass\nPASS: 3 cases\n"
	if code := run([]string{"test", listed}, &stdout, &stderr); code != 0 || stdout.String() != want || stderr.Len() > 0 {
		t.Errorf("policies: [a, b]: exit %d\n%s%s\nwant\n%s", code, stdout.String(), stderr.String(), want)
	}

	// The same cases against -p given twice; against one bundle, a case fails.
	bare := filepath.Join(tests, "bare_test.yaml")
	os.WriteFile(bare, []byte(cases), 0o644)
	stdout.Reset()
	want = strings.ReplaceAll(want, listed, bare)
	if code := run([]string{"test", "-p", platform, "-p", team, bare}, &stdout, &stderr); code != 0 || stdout.String() != want {
		t.Errorf("-p a -p b: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"test", "-p", platform, bare}, &stdout, &stderr); code != 1 || !strings.Contains(stdout.String(), "FAIL "+bare+": labels are the team's\n") {
		t.Errorf("-p a alone: exit %d\n%s", code, stdout.String())
	}

	// Neither a string nor a list.
	os.WriteFile(listed, []byte("policies: {a: b}\n"+cases), 0o644)
	stdout.Reset()
	if code := run([]string{"test", listed}, &stdout, &stderr); code != 1 || !strings.Contains(stdout.String(), "policies: want a bundle, or a list of bundles") {
		t.Errorf("policies: {a: b}: exit %d\n%s", code, stdout.String())
	}
}
