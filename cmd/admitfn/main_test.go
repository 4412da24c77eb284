package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/version"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func Example_render() {
	run([]string{"render", "-policies", "testdata/small", "-url", "https://admitfn.example.com"}, os.Stdout, os.Stderr)
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
	//     url: https://admitfn.example.com/validate
	//   failurePolicy: Fail
	//   matchPolicy: Equivalent
	//   name: validate.admitfn.io
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
		code := run([]string{"render", "-policies", "../../policies/examples", "-url", "https://127.0.0.1:8443", "-ca-bundle", ca, "-o", format}, &stdout, &stderr)
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
		{[]string{"render", "-policies", "testdata/small"}, 1, "admitfn render: a URL is required"},
		{[]string{"render", "-policies", "testdata/small", "-url", "http://x"}, 1, "kube-apiserver only calls webhooks over https"},
		{[]string{"render", "-policies", broken, "-url", "https://x"}, 1, "p.yaml: policy p: spec.validations[0].expression: compilation failed"},
		{[]string{"render", "-policies", "testdata/small", "-url", "https://x", "-o", "xml"}, 2, `-o must be yaml or json, not "xml"`},
		{[]string{"render", "-policies", "testdata/small", "-url", "https://x", "-ca-bundle", "/nonexistent"}, 1, "read CA bundle"},
		{[]string{"render", "-policies", "testdata/small", "-url", "https://x", "-ca-bundle", "testdata/small/policy.yaml"}, 1, "CA bundle testdata/small/policy.yaml holds no PEM certificate"},
		{[]string{"render", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"frobnicate"}, 2, `admitfn: unknown command "frobnicate"`},
		{nil, 2, "Usage:"},
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
	var stdout, stderr bytes.Buffer
	if code := run([]string{"render", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "Usage: admitfn render -url") {
		t.Errorf("render -h: exit %d %s", code, stderr.String())
	}
	if code := run([]string{"help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "render   print the webhook configurations") {
		t.Errorf("help: exit %d %s", code, stdout.String())
	}
}

// admitfn version and --version print the build's version line; version
// takes no arguments.
func TestVersion(t *testing.T) {
	want := version.Get().String() + "\n"
	if !strings.Contains(want, ", Kubernetes v1.37.2, "+runtime.Version()+")") {
		t.Errorf("version line %q does not name Kubernetes v1.37.2 and %s", want, runtime.Version())
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 || out.String() != want || errOut.Len() > 0 {
			t.Errorf("admitfn %v: exit %d, %q, stderr %q; want %q", args, code, out.String(), errOut.String(), want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"version", "x"}, &out, &errOut); code != 2 || errOut.String() != "admitfn version takes no arguments\n" {
		t.Errorf("admitfn version x: exit %d, stderr %q", code, errOut.String())
	}
}
