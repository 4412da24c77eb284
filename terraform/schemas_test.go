package terraform

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// schemaSets are the provider versions tf-check runs the modules against:
// the newest recorded, and the lowest the modules allow (random and time
// have one recorded version each). testdata/schemas holds each as
// <name>-<version>.json.gz.
var schemaSets = map[string]map[string]string{
	"newest": {"aws": "6.47.0", "google": "7.45.0", "kubernetes": "3.2.1", "random": "3.9.0", "time": "0.14.0"},
	"lowest": {"aws": "6.29.0", "google": "6.11.0", "kubernetes": "2.30.0", "random": "3.9.0", "time": "0.14.0"},
}

// cliEnv names the Terraform CLI tf-check runs (OpenTofu, which make
// builds; or terraform).
const cliEnv = "ADMITFN_TERRAFORM"

func terraformCLI(t *testing.T) string {
	cli := os.Getenv(cliEnv)
	if cli == "" {
		if os.Getenv("ADMITFN_TF_CHECK") == "required" {
			t.Fatalf("%s is not set", cliEnv)
		}
		t.Skipf("%s is not set: make tf-check builds OpenTofu and runs this", cliEnv)
	}
	return cli
}

// mirror is a filesystem mirror holding the recorded-schema provider under
// each name and version of one set, and the CLI configuration that
// installs providers from it alone.
type mirror struct{ dir, config string }

var (
	providerOnce sync.Once
	providerBin  string
	providerErr  error
)

// buildProvider builds hack/tfprovider once per test process.
func buildProvider(t *testing.T) string {
	providerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "admitfn-tfprovider-")
		if err != nil {
			providerErr = err
			return
		}
		providerBin = filepath.Join(dir, "tfprovider")
		out, err := exec.Command("go", "build", "-o", providerBin, "../hack/tfprovider").CombinedOutput()
		if err != nil {
			providerErr = fmt.Errorf("go build ../hack/tfprovider: %v\n%s", err, out)
		}
	})
	if providerErr != nil {
		t.Fatal(providerErr)
	}
	return providerBin
}

func newMirror(t *testing.T, set map[string]string) mirror {
	bin := buildProvider(t)
	m := mirror{dir: t.TempDir()}
	for name, version := range set {
		schema, err := os.ReadFile(filepath.Join("testdata", "schemas", name+"-"+version+".json.gz"))
		if err != nil {
			t.Fatal(err)
		}
		// Terraform resolves hashicorp/<name> on registry.terraform.io,
		// OpenTofu on registry.opentofu.org.
		for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
			dir := filepath.Join(m.dir, host, "hashicorp", name, version, "linux_amd64")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// A hard link: the provider finds its schema beside the path
			// it was started by, which a symbolic link would resolve away.
			if err := os.Link(bin, filepath.Join(dir, "terraform-provider-"+name+"_v"+version)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "schema.json.gz"), schema, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.config = filepath.Join(m.dir, "cli.tfrc")
	config := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", m.dir)
	if err := os.WriteFile(m.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// workspace copies terraform/ (modules and examples, without state or
// plugins) and the example bundle the tests read to a directory where init
// may write. It returns the copy of terraform/.
func workspace(t *testing.T) string {
	root := t.TempDir()
	for _, tree := range []struct{ from, to string }{{".", "terraform"}, {"../policies/examples", "policies/examples"}} {
		if err := copyTree(tree.from, filepath.Join(root, tree.to)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "terraform")
}

// copyTree copies the files of from to to, leaving out Go sources, test
// data, Terraform's plugins, lock files and state.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() && (d.Name() == ".terraform" || rel == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if strings.HasSuffix(path, ".go") || d.Name() == ".terraform.lock.hcl" || strings.Contains(d.Name(), ".tfstate") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
}

// mirrorWarning is the one warning tf-check expects: init from a mirror
// can record only this platform's checksums in the lock file.
const mirrorWarning = "Warning: Incomplete lock file information for providers"

// tf runs the CLI in dir with the mirror's configuration; it fails the
// test on an error and on any warning but mirrorWarning.
func tf(t *testing.T, cli string, m mirror, dir string, args ...string) string {
	t.Helper()
	out, err := tfRun(cli, m, dir, args...)
	if err != nil {
		t.Errorf("%s: %s %s: %v\n%s", dir, filepath.Base(cli), strings.Join(args, " "), err, out)
	} else if strings.Count(out, "Warning:") > strings.Count(out, mirrorWarning) {
		t.Errorf("%s: %s %s warns:\n%s", dir, filepath.Base(cli), strings.Join(args, " "), out)
	}
	return out
}

func tfRun(cli string, m mirror, dir string, args ...string) (string, error) {
	cmd := exec.Command(cli, append(args, "-no-color")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+m.config, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Every module and example initialises, validates and passes its tests
// against the real providers' schemas, at the newest versions recorded and
// at the lowest the modules allow, without a diagnostic.
func TestModulesAgainstProviderSchemas(t *testing.T) {
	cli := terraformCLI(t)
	for _, name := range []string{"newest", "lowest"} {
		set := schemaSets[name]
		t.Run(name, func(t *testing.T) {
			m := newMirror(t, set)
			root := workspace(t)
			for _, dir := range append(append([]string{}, modules...), examples...) {
				t.Run(dir, func(t *testing.T) {
					path := filepath.Join(root, dir)
					tf(t, cli, m, path, "init", "-backend=false", "-input=false")
					if t.Failed() {
						return
					}
					lock, err := os.ReadFile(filepath.Join(path, ".terraform.lock.hcl"))
					if err != nil && dir != "modules/bundle" {
						t.Fatal(err)
					}
					for _, p := range regexp.MustCompile(`provider "[^"]+/hashicorp/([a-z]+)" \{\n\s+version\s+= "([^"]+)"`).FindAllStringSubmatch(string(lock), -1) {
						if p[2] != set[p[1]] {
							t.Errorf("init chose %s %s, want %s", p[1], p[2], set[p[1]])
						}
					}
					tf(t, cli, m, path, "validate")
					out := tf(t, cli, m, path, "test")
					if !regexp.MustCompile(`Success! [1-9]\d* passed, 0 failed`).MatchString(out) {
						t.Errorf("%s: test:\n%s", dir, out)
					}
				})
			}
		})
	}
}

// The lowest set is what the modules' constraints allow at least: each
// `version = ">= X"` is the lowest set's version.
func TestLowestSchemasAreTheConstraints(t *testing.T) {
	constraint := regexp.MustCompile(`(?s)(\w+) = \{\s*source\s*= "hashicorp/(\w+)"\s*(?:#[^\n]*\n\s*)*version = ">= ([0-9.]+)"`)
	seen := map[string]bool{}
	for _, dir := range append(append([]string{}, modules...), examples...) {
		src, err := os.ReadFile(filepath.Join(dir, "versions.tf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range constraint.FindAllStringSubmatch(string(src), -1) {
			name, lowest := m[2], m[3]
			seen[name] = true
			want := schemaSets["lowest"][name]
			if want == "" || strings.Count(lowest, ".") == 1 && lowest+".0" != want || strings.Count(lowest, ".") == 2 && lowest != want {
				t.Errorf("%s: %s >= %s, but tf-check's lowest %s is %q", dir, name, lowest, name, want)
			}
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "aws google kubernetes random time" {
		t.Errorf("constraints found for %v", names)
	}
}

// The check fails where it should: a resource with a misspelled argument
// and without a required one does not validate.
func TestProviderSchemasCatchMistakes(t *testing.T) {
	cli := terraformCLI(t)
	m := newMirror(t, map[string]string{"aws": schemaSets["newest"]["aws"]})
	dir := t.TempDir()
	broken := `terraform {
  required_providers {
    aws = { source = "hashicorp/aws" }
  }
}

resource "aws_iam_role" "r" {
  name_prefx = "admitfn"
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, cli, m, dir, "init", "-backend=false", "-input=false")
	out, err := tfRun(cli, m, dir, "validate")
	flat := strings.Join(strings.Fields(out), " ") // the CLI wraps its messages
	if err == nil || !strings.Contains(flat, `An argument named "name_prefx" is not expected here. Did you mean "name_prefix"?`) ||
		!strings.Contains(flat, `The argument "assume_role_policy" is required, but no definition was found.`) {
		t.Errorf("validate of a broken module: %v\n%s", err, out)
	}
}

// make tf-check builds the OpenTofu and terraform-docs the tools modules
// require.
func TestToolVersionsAreTheToolsModules(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for variable, tool := range map[string]string{"TOFU_VERSION": "tofu:github.com/opentofu/opentofu", "TFDOCS_VERSION": "terraform-docs:github.com/terraform-docs/terraform-docs"} {
		dir, module, _ := strings.Cut(tool, ":")
		gomod, err := os.ReadFile(filepath.Join("../hack/tools", dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(`(?m)^` + variable + ` := (\S+)$`).FindSubmatch(makefile)
		got := regexp.MustCompile(`(?m)^require ` + regexp.QuoteMeta(module) + ` (\S+)$`).FindSubmatch(gomod)
		if want == nil || got == nil || string(got[1]) != string(want[1]) {
			t.Errorf("the Makefile's %s %q, hack/tools/%s requires %q", variable, want, dir, got)
		}
	}
}

// Every resource the function modules create that takes tags (aws) or
// labels (google), by the provider's recorded schema, is given the
// module's.
func TestTagsOnEverythingThatTakesThem(t *testing.T) {
	for dir, c := range map[string]struct{ schema, provider, attr, value string }{
		"modules/aws-lambda":   {"aws-" + schemaSets["newest"]["aws"], "aws", "tags", "var.tags"},
		"modules/gcp-function": {"google-" + schemaSets["newest"]["google"], "google", "labels", "var.labels"},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", "schemas", c.schema+".json.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			ProviderSchemas map[string]struct {
				ResourceSchemas map[string]struct {
					Block struct {
						Attributes map[string]struct{ Optional bool }
					}
				} `json:"resource_schemas"`
			} `json:"provider_schemas"`
		}
		if err := json.NewDecoder(zr).Decode(&file); err != nil {
			t.Fatal(err)
		}
		resources := file.ProviderSchemas["registry.terraform.io/hashicorp/"+c.provider].ResourceSchemas
		src, err := os.ReadFile(filepath.Join(dir, "main.tf"))
		if err != nil {
			t.Fatal(err)
		}
		f, diags := hclsyntax.ParseConfig(src, "main.tf", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		taking := 0
		for _, block := range f.Body.(*hclsyntax.Body).Blocks {
			if block.Type != "resource" || !resources[block.Labels[0]].Block.Attributes[c.attr].Optional {
				continue
			}
			taking++
			attr, ok := block.Body.Attributes[c.attr]
			if !ok || string(attr.Expr.Range().SliceBytes(src)) != c.value {
				t.Errorf("%s: %s.%s takes %s but is not given %s", dir, block.Labels[0], block.Labels[1], c.attr, c.value)
			}
		}
		if taking < 3 {
			t.Errorf("%s: %d resources take %s: the schema was not read", dir, taking, c.attr)
		}
	}
}
