package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/admitfn/admitfn/core/lint"
)

// admitfnWith runs the CLI with stdin and an environment of its own.
func admitfnWith(stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	c := &cli{in: strings.NewReader(stdin), out: &out, err: &errb, getenv: func(k string) string { return env[k] }}
	code = c.run(args)
	return code, out.String(), errb.String()
}

// Flags go anywhere after the command, in short, long and = forms.
func TestFlagsAnywhere(t *testing.T) {
	_, want, _ := admitfn("lint", "--output", "json", "testdata/lint")
	for _, args := range [][]string{
		{"lint", "testdata/lint", "-o", "json"},
		{"lint", "-ojson", "testdata/lint"},
		{"lint", "--output=json", "-p", "testdata/lint"},
		{"lint", "-p", "testdata/lint", "-o=json"},
	} {
		code, got, errOut := admitfn(args...)
		if code != 1 || got != want || errOut != "" {
			t.Errorf("admitfn %v: exit %d, stderr %q, output differs: %v", args, code, errOut, got != want)
		}
	}
	_, want, _ = admitfn("render", "-p", "testdata/small", "--url", "https://x", "-o", "json")
	if code, got, _ := admitfn("render", "-o", "json", "--url=https://x", "--policies", "testdata/small"); code != 0 || got != want {
		t.Errorf("render with flags in another order: exit %d\n%s", code, got)
	}
}

// Every command has --help (and -h) with examples, on stdout, exit 0.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, cmd := range []string{"init", "render", "test", "lint", "apply", "push", "keygen", "token", "version"} {
		for _, flag := range []string{"--help", "-h"} {
			code, out, errOut := admitfn(cmd, flag)
			if code != 0 || errOut != "" || !strings.Contains(out, "\nUsage:\n  admitfn "+cmd) || !strings.Contains(out, "\nExamples:\n  ") {
				t.Errorf("admitfn %s %s: exit %d, stderr %q\n%s", cmd, flag, code, errOut, out)
			}
		}
	}
	if code, out, _ := admitfn("help", "push"); code != 0 || !strings.Contains(out, "admitfn push -p BUNDLE --to") {
		t.Errorf("admitfn help push: exit %d\n%s", code, out)
	}
}

// Shell completion: the scripts, and the completions the scripts ask for.
func TestCompletion(t *testing.T) {
	for shell, mark := range map[string]string{"bash": "__start_admitfn", "zsh": "#compdef admitfn", "fish": "complete -c admitfn", "powershell": "Register-ArgumentCompleter"} {
		if code, out, _ := admitfn("completion", shell); code != 0 || !strings.Contains(out, mark) {
			t.Errorf("completion %s: exit %d, no %q", shell, code, mark)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "rend"}, "render\tPrint the webhook configurations that point kube-apiserver at the function\n:4\n"},
		{[]string{"__complete", "render", "-o", ""}, "yaml\njson\n:4\n"},
		{[]string{"__complete", "test", "--output", ""}, "text\njson\njunit\n:4\n"},
		{[]string{"__complete", "lint", "-o", ""}, "text\njson\nsarif\n:4\n"},
		{[]string{"__complete", "render", "-p", ""}, "yaml\nyml\njson\n:8\n"},
	} {
		code, out, _ := admitfn(tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("admitfn %v: exit %d, %q, want %q", tc.args, code, out, tc.want)
		}
	}
}

// The bundle is a directory, a single file or standard input, alike in
// every command.
func TestBundleArgument(t *testing.T) {
	policy, err := os.ReadFile("testdata/small/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, want, _ := admitfn("render", "-p", "testdata/small", "--url", "https://x")
	if code, got, errOut := admitfn("render", "-p", "testdata/small/policy.yaml", "--url", "https://x"); code != 0 || got != want {
		t.Errorf("render from a file: exit %d %s\n%s", code, errOut, got)
	}
	if code, got, errOut := admitfnWith(string(policy), nil, "render", "-p", "-", "--url", "https://x"); code != 0 || got != want {
		t.Errorf("render from stdin: exit %d %s\n%s", code, errOut, got)
	}

	bad := strings.Replace(string(policy), "object.spec.replicas", "object.spec.replicaz", 1)
	code, got, _ := admitfnWith(bad, nil, "lint", "-p", "-")
	if code != 1 || !strings.HasPrefix(got, "<stdin>: document 1: error: ValidatingAdmissionPolicy max-replicas.example.com: spec.validations[0].expression: apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'") {
		t.Errorf("lint from stdin: exit %d\n%s", code, got)
	}
	if code, got, errOut := admitfn("lint", "-p", "testdata/lint/policy.yaml"); code != 1 || !strings.HasPrefix(got, "testdata/lint/policy.yaml: document 1: error: ") {
		t.Errorf("lint of a file: exit %d %s\n%s", code, errOut, got)
	}
	if code, _, errOut := admitfnWith("", nil, "lint", "-p", "-", "-"); code != 2 || errOut != "admitfn lint: standard input (-) can be read only once\nRun 'admitfn lint --help' for usage.\n" {
		t.Errorf("lint - -: exit %d %q", code, errOut)
	}

	to := filepath.Join(t.TempDir(), "out")
	if code, out, errOut := admitfnWith(string(policy), nil, "push", "-p", "-", "--to", to); code != 0 || !strings.HasPrefix(out, to+" holds no bundle: bundle 27062922a96a199e would be its first\n") || !strings.Contains(out, "\nuploaded stdin.yaml (538 bytes, sha256 1ffd78cc2c8e)\nuploaded .admitfn/packed.json (") {
		t.Errorf("push from stdin: exit %d %s\n%s", code, errOut, out)
	}
	if code, got, errOut := admitfn("render", "-p", to, "--url", "https://x"); code != 0 || got != want {
		t.Errorf("render of what push published: exit %d %s\n%s", code, errOut, got)
	}

	// test -p runs a test file against another bundle: here one that
	// denies every Deployment the file expects allowed.
	strict := filepath.Join(t.TempDir(), "strict.yaml")
	os.WriteFile(strict, []byte(strings.ReplaceAll(string(policy), "object.spec.replicas <= 5", "false")), 0o644)
	code, got, _ = admitfn("test", "testdata/tests/bundle/replicas_test.yaml", "-p", strict)
	if code != 1 || !strings.Contains(got, "FAIL testdata/tests/bundle/replicas_test.yaml: five replicas elsewhere are allowed\n       allowed: got false, want true (denied with \"ValidatingAdmissionPolicy 'max-replicas.example.com' with binding 'max-replicas' denied request: failed expression: false\")") {
		t.Errorf("test -p: exit %d\n%s", code, got)
	}
}

// A test file that does not load fails alone; the others still run.
func TestTestFileErrorsStayInTheirFile(t *testing.T) {
	dir := t.TempDir()
	bundle, _ := filepath.Abs("testdata/tests/bundle")
	os.WriteFile(filepath.Join(dir, "a_test.yaml"), []byte("policies: "+bundle+"\ncases:\n- name: broken\n  expect: {alowed: true}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b_test.yaml"), []byte("apiVersion: admitfn.io/v1alpha1\nkind: PolicyTest\npolicies: "+bundle+"\ncases:\n- name: one replica\n  userInfo: {username: alice}\n  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 1}}\n  expect: {allowed: true, auditAnnotations: {replicas.test.admitfn.io_replicas: \"1\"}, object: {spec: {replicas: 1}}}\n"), 0o644)
	code, out, errOut := admitfn("test", dir)
	a, b := filepath.Join(dir, "a_test.yaml"), filepath.Join(dir, "b_test.yaml")
	want := "FAIL " + a + ": the file does not load\n       " + a + ":3: cases[0] (broken): unknown field \"alowed\"\n" +
		"ok   " + b + ": one replica\n" +
		"FAIL: 0 of 1 case failed, 1 file did not load\n"
	if code != 1 || out != want || errOut != "" {
		t.Errorf("exit %d, stderr %q\n%s\nwant\n%s", code, errOut, out, want)
	}

	// The JUnit report: a suite per file, the broken file as an error.
	code, out, _ = admitfn("test", "-o", "junit", dir, "testdata/tests")
	if code != 1 || !strings.HasPrefix(out, xml.Header+"<testsuites name=\"admitfn test\" tests=\"8\" failures=\"1\" errors=\"1\" time=\"") {
		t.Fatalf("junit: exit %d\n%s", code, out)
	}
	var report junitSuites
	if err := xml.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range report.Suites {
		got = append(got, fmt.Sprintf("suite %s tests=%d failures=%d errors=%d", s.Name, s.Tests, s.Failures, s.Errors))
		for _, c := range s.Cases {
			line := fmt.Sprintf("  case %s [%s]", c.Name, c.ClassName)
			if c.Failure != nil {
				line += " failure " + c.Failure.Type + ": " + c.Failure.Message
			}
			if c.Error != nil {
				line += " error " + c.Error.Type + ": " + c.Error.Message
			}
			if !regexp.MustCompile(`^\d+\.\d{3}$`).MatchString(c.Time) {
				t.Errorf("case %s: time %q", c.Name, c.Time)
			}
			got = append(got, line)
		}
	}
	wantSuites := []string{
		"suite " + a + " tests=1 failures=0 errors=1",
		"  case (load the test file) [" + a + "] error load: " + a + ":3: cases[0] (broken): unknown field \"alowed\"",
		"suite " + b + " tests=1 failures=0 errors=0",
		"  case one replica [" + b + "]",
		"suite testdata/tests/bundle/replicas_test.yaml tests=4 failures=0 errors=0",
		"  case five replicas in prod are denied [testdata/tests/bundle/replicas_test.yaml]",
		"  case five replicas elsewhere are allowed [testdata/tests/bundle/replicas_test.yaml]",
		"  case two replicas in prod are annotated and labelled [testdata/tests/bundle/replicas_test.yaml]",
		"  case kube-system is not sent to the webhooks [testdata/tests/bundle/replicas_test.yaml]",
		"suite testdata/tests/failing/wrong_test.yaml tests=2 failures=1 errors=0",
		"  case wrong expectations [testdata/tests/failing/wrong_test.yaml] failure mismatch: allowed: got true, want false",
		"  case right expectations [testdata/tests/failing/wrong_test.yaml]",
	}
	if strings.Join(got, "\n") != strings.Join(wantSuites, "\n") {
		t.Errorf("junit report:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantSuites, "\n"))
	}
	if f := report.Suites[3].Cases[0].Failure; f == nil || !strings.Contains(f.Text, "\nobject.metadata.labels.owner: got \"alice\", want \"bob\"") {
		t.Errorf("the failure's text lacks the differences: %+v", f)
	}
}

func TestLintJSONAndSARIF(t *testing.T) {
	code, out, _ := admitfn("lint", "-o", "json", "testdata/lint", "testdata/nonexistent")
	want := `{
  "errors": 2,
  "warnings": 1,
  "findings": [
    {
      "bundle": "testdata/lint",
      "file": "testdata/lint/policy.yaml",
      "document": 1,
      "line": 1,
      "rule": "type-check",
      "severity": "error",
      "object": "ValidatingAdmissionPolicy replicas.lint.admitfn.io",
      "field": "spec.validations[0].expression",
      "message": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz <= 3\n | ...........^"
    },
    {
      "bundle": "testdata/lint",
      "file": "testdata/lint/policy.yaml",
      "document": 1,
      "line": 1,
      "rule": "namespace-object",
      "severity": "warning",
      "object": "ValidatingAdmissionPolicy replicas.lint.admitfn.io",
      "field": "spec.validations[1].expression",
      "message": "namespaceObject.metadata.labels: a function is not sent the namespace, so namespaceObject holds only metadata.name; select on namespace labels with the binding's namespaceSelector"
    },
    {
      "bundle": "testdata/nonexistent",
      "rule": "load",
      "severity": "error",
      "message": "no such file or directory"
    }
  ]
}
`
	if code != 1 || out != want {
		t.Errorf("lint -o json: exit %d\n%s", code, out)
	}

	code, out, _ = admitfn("lint", "-o", "sarif", "testdata/lint", "testdata/nonexistent")
	var log struct {
		Version string
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string
					Rules []struct {
						ID                   string
						DefaultConfiguration struct{ Level string }
					}
				}
			}
			Results []struct {
				RuleID    string
				RuleIndex int
				Level     string
				Message   struct{ Text string }
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           *struct{ StartLine int }
					}
					LogicalLocations []struct{ FullyQualifiedName string }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil || code != 1 || log.Version != "2.1.0" || len(log.Runs) != 1 {
		t.Fatalf("lint -o sarif: exit %d, %v\n%s", code, err, out)
	}
	run := log.Runs[0]
	rules := run.Tool.Driver.Rules
	if run.Tool.Driver.Name != "admitfn" || len(rules) != len(lint.Rules)+1 {
		t.Fatalf("driver: %+v", run.Tool.Driver)
	}
	var got []string
	for _, r := range run.Results {
		loc := r.Locations[0]
		line := fmt.Sprintf("%s(%s) %s %s", r.RuleID, rules[r.RuleIndex].ID, r.Level, loc.PhysicalLocation.ArtifactLocation.URI)
		if reg := loc.PhysicalLocation.Region; reg != nil {
			line += fmt.Sprintf(":%d", reg.StartLine)
		}
		for _, l := range loc.LogicalLocations {
			line += " " + l.FullyQualifiedName
		}
		got = append(got, line)
	}
	wantResults := []string{
		"type-check(type-check) error testdata/lint/policy.yaml:1 ValidatingAdmissionPolicy replicas.lint.admitfn.io/spec.validations[0].expression",
		"namespace-object(namespace-object) warning testdata/lint/policy.yaml:1 ValidatingAdmissionPolicy replicas.lint.admitfn.io/spec.validations[1].expression",
		"load(load) error testdata/nonexistent",
	}
	if strings.Join(got, "\n") != strings.Join(wantResults, "\n") {
		t.Errorf("sarif results:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantResults, "\n"))
	}
	for _, r := range rules {
		if r.DefaultConfiguration.Level != "error" && r.DefaultConfiguration.Level != "warning" {
			t.Errorf("rule %s: level %q", r.ID, r.DefaultConfiguration.Level)
		}
	}
}

// Colour on a terminal only, and never with NO_COLOR.
func TestColourOnlyOnATerminal(t *testing.T) {
	run := func(env map[string]string, w io.Writer) {
		c := &cli{in: strings.NewReader(""), out: w, err: io.Discard, getenv: func(k string) string { return env[k] }}
		c.run([]string{"test", "testdata/tests/failing"})
	}
	tty, read := pty(t)
	run(nil, tty)
	tty.Close()
	if out := read(); !strings.Contains(out, "\x1b[31mFAIL\x1b[0m testdata/tests/failing/wrong_test.yaml: wrong expectations") || !strings.Contains(out, "\x1b[32mok  \x1b[0m testdata/tests/failing/wrong_test.yaml: right expectations") {
		t.Errorf("on a terminal: %q", out)
	}
	for _, env := range []map[string]string{{"NO_COLOR": "1"}, {"TERM": "dumb"}} {
		tty, read := pty(t)
		run(env, tty)
		tty.Close()
		if out := read(); strings.Contains(out, "\x1b[") || !strings.Contains(out, "FAIL testdata/tests/failing/wrong_test.yaml") {
			t.Errorf("%v: %q", env, out)
		}
	}
	var buf bytes.Buffer
	run(nil, &buf)
	if strings.Contains(buf.String(), "\x1b[") {
		t.Errorf("colour into a pipe: %q", buf.String())
	}
}

// pty opens a pseudo-terminal: the terminal end to write to, and a reader
// of all that was written once it is closed.
func pty(t *testing.T) (*os.File, func() string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, master) // ends with EIO once the terminal end is closed
		done <- strings.ReplaceAll(b.String(), "\r\n", "\n")
	}()
	return tty, func() string { return <-done }
}

// A missing credential gets a hint, not the SDK's provider chain.
func TestPushCredentialHints(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "AWS_CONFIG_FILE": filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "none"),
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1",
		"GOOGLE_APPLICATION_CREDENTIALS": "", "STORAGE_EMULATOR_HOST": "", "CLOUDSDK_CONFIG": filepath.Join(home, "gcloud"),
		"GCE_METADATA_HOST": "", "NO_GCE_CHECK": "true",
	} {
		t.Setenv(k, v)
	}
	for to, want := range map[string]string{
		"s3://bucket/prefix": "admitfn push: s3://bucket/prefix: no AWS credentials found. Set AWS_PROFILE to a profile in ~/.aws/config (after 'aws sso login' or 'aws configure'), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where an IAM role is attached; AWS_REGION names the bucket's region\n",
		"gs://bucket/prefix": "admitfn push: gs://bucket/prefix: no Google credentials found. Run 'gcloud auth application-default login', or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run where a service account is attached (STORAGE_EMULATOR_HOST points at an emulator)\n",
	} {
		if code, _, errOut := admitfn("push", "-p", "testdata/small", "--to", to); code != 1 || errOut != want {
			t.Errorf("push --to %s: exit %d\n%s\nwant\n%s", to, code, errOut, want)
		}
	}
}
