package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/version"
	"github.com/admitfn/admitfn/test/doccheck"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func Example_render() {
	run([]string{"render", "-p", "testdata/small", "--url", "https://admitfn.example.com"}, os.Stdout, os.Stderr)
	// Output:
	// apiVersion: admissionregistration.k8s.io/v1
	// kind: ValidatingWebhookConfiguration
	// metadata:
	//   labels:
	//     app.kubernetes.io/managed-by: admitfn
	//   name: admitfn
	// webhooks:
	// - admissionReviewVersions:
	//   - v1
	//   - v1beta1
	//   clientConfig:
	//     url: https://admitfn.example.com/validate/8b3e12d787
	//   failurePolicy: Fail
	//   matchPolicy: Equivalent
	//   name: 8b3e12d787.validate.admitfn.io
	//   namespaceSelector:
	//     matchExpressions:
	//     - key: kubernetes.io/metadata.name
	//       operator: NotIn
	//       values:
	//       - kube-system
	//   objectSelector: {}
	//   rules:
	//   - apiGroups:
	//     - apps
	//     apiVersions:
	//     - v1
	//     operations:
	//     - CREATE
	//     - UPDATE
	//     resources:
	//     - deployments
	//     scope: '*'
	//   sideEffects: None
	//   timeoutSeconds: 10
}

// The example bundle's configuration, as YAML and JSON, against golden files.
func TestRenderExamples(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644)
	for _, format := range []string{"yaml", "json"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"render", "-p", "../../policies/examples", "--url", "https://127.0.0.1:8443", "--ca-bundle", ca, "-o", format}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		golden := filepath.Join("testdata", "render-examples."+format)
		if *update {
			os.WriteFile(golden, stdout.Bytes(), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if stdout.String() != string(want) {
			t.Errorf("render -o %s differs from %s:\n%s", format, golden, stdout.String())
		}
		// What was pushed down, and what was not, on standard error.
		report := filepath.Join("testdata", "render-examples.report")
		if *update {
			os.WriteFile(report, stderr.Bytes(), 0o644)
		}
		if want, err := os.ReadFile(report); err != nil || stderr.String() != string(want) {
			t.Errorf("render -o %s: report differs from %s (%v):\n%s", format, report, err, stderr.String())
		}
	}
	// Turned off, or quiet.
	for _, tc := range []struct {
		flag                 string
		conditions, reported bool
	}{{"--push-down=false", false, false}, {"-q", true, false}, {"--quiet", true, false}} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"render", "-p", "../../policies/examples", "--url", "https://127.0.0.1:8443", tc.flag}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.flag, code, stderr.String())
		}
		if got := strings.Contains(stdout.String(), "matchConditions:"); got != tc.conditions {
			t.Errorf("%s: matchConditions rendered: %v, want %v", tc.flag, got, tc.conditions)
		}
		if got := stderr.Len() > 0; got != tc.reported {
			t.Errorf("%s: report %q", tc.flag, stderr.String())
		}
	}
}

// admitfn alone prints its help on stdout and succeeds, as kubectl does.
func TestBareCommandIsHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage:\n  admitfn [flags]\n  admitfn [command]\n") || stderr.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestRenderErrors(t *testing.T) {
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "p.yaml"), []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}\n  validations: [{expression: 'nope'}]\n"), 0o644)
	for _, tc := range []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"render", "-p", "testdata/small"}, 2, "admitfn render: --url is required: the function's base URL, https://HOST[:PORT][/prefix]\nRun 'admitfn render --help' for usage.\n"},
		{[]string{"render", "--url", "https://x"}, 2, "admitfn render: name the bundle with -p/--policies: a directory, a YAML or JSON file, - for standard input, or s3://bucket/prefix or gs://bucket/prefix\n"},
		{[]string{"render", "-p", "testdata/nonexistent", "--url", "https://x"}, 1, "admitfn render: bundle testdata/nonexistent: no such file or directory\n"},
		{[]string{"render", "-p", "testdata/tests/bundle/replicas_test.yaml", "--url", "https://x"}, 1, "admitfn render: bundle testdata/tests/bundle/replicas_test.yaml: a test file, not a bundle (run it with admitfn test testdata/tests/bundle/replicas_test.yaml)\n"},
		{[]string{"render", "-p", "main.go", "--url", "https://x"}, 1, "admitfn render: bundle main.go: not a .yaml, .yml or .json file\n"},
		{[]string{"render", "-p", "testdata/small", "--url", "http://x"}, 2, "admitfn render: invalid URL \"http://x\": kube-apiserver only calls webhooks over https\nRun 'admitfn render --help' for usage.\n"},
		{[]string{"render", "-p", "testdata/small", "--url", "https://x", "--timeout", "45"}, 2, "admitfn render: timeout 45s out of range: kube-apiserver accepts 1 to 30 seconds\nRun 'admitfn render --help' for usage.\n"},
		{[]string{"render", "-p", "testdata/small", "--url", "https://x", "--cluster", "Prod/EU"}, 2, "admitfn render: cluster \"Prod/EU\": want a DNS label"},
		{[]string{"render", "-p", broken, "--url", "https://x"}, 1, "p.yaml: policy p: spec.validations[0].expression: compilation failed"},
		{[]string{"render", "-p", "testdata/small", "--url", "https://x", "-o", "xml"}, 2, `admitfn render: -o/--output must be yaml or json, not "xml"`},
		{[]string{"render", "-p", "testdata/small", "--url", "https://x", "--ca-bundle", "/nonexistent"}, 1, "read CA bundle"},
		{[]string{"render", "-p", "testdata/small", "--url", "https://x", "--ca-bundle", "testdata/small/policy.yaml"}, 1, "CA bundle testdata/small/policy.yaml holds no PEM certificate"},
		{[]string{"render", "--bogus"}, 2, "admitfn render: unknown flag: --bogus\nRun 'admitfn render --help' for usage.\n"},
		{[]string{"render", "-policies", "testdata/small"}, 2, "admitfn: -policies: long flags take two dashes: --policies\n"},
		{[]string{"render", "-p", "testdata/small", "--url", "https://x", "extra"}, 2, "admitfn render: unexpected arguments: extra\n"},
		{[]string{"frobnicate"}, 2, "admitfn: unknown command \"frobnicate\"\nRun 'admitfn --help' for usage.\n"},
		{[]string{"rendr"}, 2, `admitfn: unknown command "rendr"; did you mean "render"?`},
		{[]string{"rendr", "-p", "x"}, 2, "admitfn: unknown command \"rendr\"; did you mean \"render\"?\nRun 'admitfn --help' for usage.\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.inStderr) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", tc.args, code, stderr.String(), tc.code, tc.inStderr)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: wrote to stdout: %s", tc.args, stdout.String())
		}
	}
}

// admitfn version and --version print the build's version line; version
// takes no arguments.
func TestVersion(t *testing.T) {
	want := version.Get().String() + "\n"
	if !strings.Contains(want, ", Kubernetes v1.37.2, "+runtime.Version()+")") {
		t.Errorf("version line %q does not name Kubernetes v1.37.2 and %s", want, runtime.Version())
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}, {"version", "-o", "text"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 || out.String() != want || errOut.Len() > 0 {
			t.Errorf("admitfn %v: exit %d, %q, stderr %q; want %q", args, code, out.String(), errOut.String(), want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"version", "x"}, &out, &errOut); code != 2 || errOut.String() != "admitfn version: unexpected arguments: x\nRun 'admitfn version --help' for usage.\n" {
		t.Errorf("admitfn version x: exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	var got map[string]string
	if code := run([]string{"version", "--output=json"}, &out, &errOut); code != 0 || json.Unmarshal(out.Bytes(), &got) != nil {
		t.Fatalf("version -o json: exit %d %s", code, out.String())
	}
	info := version.Get()
	if want := map[string]string{"version": info.Version, "revision": info.Revision, "kubernetes": "v1.37.2", "go": runtime.Version()}; !reflect.DeepEqual(got, want) {
		t.Errorf("version -o json: %v, want %v", got, want)
	}
}

// docs/cluster.md's push-down report is render's, for the two policies it
// names, in one file.
func TestPushDownDoc(t *testing.T) {
	block := doccheck.Find(t, "docs/cluster.md", 1)[0]
	dir := t.TempDir()
	var bundle []byte
	for i, name := range []string{"conditions.yaml", "names.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../core/render/testdata/pushdown", name))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			bundle = append(bundle, "---\n"...)
		}
		bundle = append(bundle, data...)
	}
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"render", "-p", dir, "--url", "https://fn.example.com"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stderr.String() != block.Text {
		t.Errorf("%s shows\n%s\nrender prints\n%s", block, block.Text, stderr.String())
	}
	if n := strings.Count(stdout.String(), "name: admitfn.io/could-act"); n != 1 {
		t.Errorf("%d conditions admitfn.io/could-act:\n%s", n, stdout.String())
	}
}
