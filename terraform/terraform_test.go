// Package terraform holds the offline checks of the Terraform modules and
// examples: they load without diagnostics, are formatted, wire only declared
// variables and outputs, their variable validations reject what they should,
// and the webhook module's input type is exactly what `admitfn render -o
// json` emits. None needs the Terraform CLI or a provider.
package terraform

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/testbin"
	"github.com/hashicorp/go-cty-funcs/filesystem"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"sigs.k8s.io/yaml"
)

var (
	modules  = []string{"modules/bundle", "modules/aws-lambda", "modules/gcp-function", "modules/webhook"}
	examples = []string{"examples/aws-eks", "examples/gcp-gke"}
)

var update = flag.Bool("update", false, "rewrite examples/tests/published-webhooks.json with what admitfn push publishes")

// admitfn is the CLI, built once: the golden test runs `admitfn render`.
var admitfn string

func TestMain(m *testing.M) {
	admitfn = testbin.MustGet("admitfn")
	os.Exit(testbin.Run(m))
}

func TestModulesLoadWithoutDiagnostics(t *testing.T) {
	for _, dir := range append(append([]string{}, modules...), examples...) {
		mod, diags := tfconfig.LoadModule(dir)
		if len(diags) > 0 {
			t.Errorf("%s: %v", dir, diags)
			continue
		}
		if len(mod.Variables) == 0 || len(mod.Outputs) == 0 {
			t.Errorf("%s: %d variables, %d outputs", dir, len(mod.Variables), len(mod.Outputs))
		}
		for _, v := range mod.Variables {
			if v.Description == "" || v.Type == "" {
				t.Errorf("%s: variable %s needs a description and a type", dir, v.Name)
			}
		}
		for _, o := range mod.Outputs {
			if o.Description == "" {
				t.Errorf("%s: output %s needs a description", dir, o.Name)
			}
		}
		if dir != "modules/bundle" {
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Errorf("%s: no README.md", dir)
			}
		}
		for _, f := range []string{"main.tf", "variables.tf", "outputs.tf", "versions.tf"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: no %s", dir, f)
			}
		}
	}
}

// terraform fmt's layout: every file is a fixed point of hclwrite.Format,
// the formatter `terraform fmt` uses.
func TestFormatted(t *testing.T) {
	files, err := filepath.Glob("*/*/*.tf")
	if err != nil {
		t.Fatal(err)
	}
	tests, _ := filepath.Glob("*/*/tests/*.tftest.hcl")
	files = append(files, tests...)
	if len(files) < 20 {
		t.Fatalf("only %d files found", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, diags := hclsyntax.ParseConfig(src, f, hcl.InitialPos); diags.HasErrors() {
			t.Errorf("%s: %v", f, diags)
			continue
		}
		if got := hclwrite.Format(src); !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted: run terraform fmt -recursive terraform/", f)
		}
	}
}

// metaArguments of a module block, which are not the module's variables.
var metaArguments = map[string]bool{"source": true, "version": true, "count": true, "for_each": true, "providers": true, "depends_on": true}

func TestExamplesPassDeclaredVariablesAndUseDeclaredOutputs(t *testing.T) {
	for _, dir := range examples {
		p := hclparse.NewParser()
		calls := map[string]*tfconfig.Module{}
		var bodies []*hclsyntax.Body
		tfs, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
		for _, f := range tfs {
			file, diags := p.ParseHCLFile(f)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			body := file.Body.(*hclsyntax.Body)
			bodies = append(bodies, body)
			for _, block := range body.Blocks {
				if block.Type != "module" {
					continue
				}
				name := block.Labels[0]
				src, diags := block.Body.Attributes["source"].Expr.Value(nil)
				if diags.HasErrors() {
					t.Fatalf("%s: module %s: source: %v", dir, name, diags)
				}
				mod, ldiags := tfconfig.LoadModule(filepath.Join(dir, src.AsString()))
				if ldiags.HasErrors() {
					t.Fatalf("%s: module %s: %v", dir, name, ldiags)
				}
				calls[name] = mod
				for arg := range block.Body.Attributes {
					if !metaArguments[arg] && mod.Variables[arg] == nil {
						t.Errorf("%s: module %s passes %s, which %s does not declare", dir, name, arg, src.AsString())
					}
				}
				for _, v := range mod.Variables {
					if v.Required && block.Body.Attributes[v.Name] == nil {
						t.Errorf("%s: module %s does not pass required variable %s", dir, name, v.Name)
					}
				}
			}
		}
		if len(calls) != 2 {
			t.Errorf("%s calls %d modules, want the function module and the webhook module", dir, len(calls))
		}
		// Every module.<name>.<output> an example refers to exists.
		refs := 0
		for _, body := range bodies {
			hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
				expr, ok := n.(hclsyntax.Expression)
				if !ok {
					return nil
				}
				for _, tr := range expr.Variables() {
					if tr.RootName() != "module" || len(tr) < 3 {
						continue
					}
					name := tr[1].(hcl.TraverseAttr).Name
					out := tr[2].(hcl.TraverseAttr).Name
					refs++
					if mod := calls[name]; mod == nil {
						t.Errorf("%s refers to module.%s, which it does not call", dir, name)
					} else if mod.Outputs[out] == nil {
						t.Errorf("%s refers to module.%s.%s: no such output", dir, name, out)
					}
				}
				return nil
			})
		}
		if refs == 0 {
			t.Errorf("%s refers to no module output", dir)
		}
	}
}

// --- variable validations, evaluated as Terraform would

// functions are the Terraform functions the modules' validations use.
func functions(baseDir string) map[string]function.Function {
	strFn := func(f func(s, affix string) bool) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "affix", Type: cty.String}},
			Type:   function.StaticReturnType(cty.Bool),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
			},
		})
	}
	return map[string]function.Function{
		"alltrue":         alltrue,
		"coalesce":        stdlib.CoalesceFunc,
		"can":             tryfunc.CanFunc,
		"contains":        stdlib.ContainsFunc,
		"endswith":        strFn(strings.HasSuffix),
		"fileset":         filesystem.MakeFileSetFunc(baseDir), // Terraform's own, doublestar globs
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"regex":           stdlib.RegexFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"startswith":      strFn(strings.HasPrefix),
		"tonumber":        stdlib.MakeToFunc(cty.Number),
		"trimspace":       stdlib.TrimSpaceFunc,
		"try":             tryfunc.TryFunc,
	}
}

var alltrue = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			if _, v := it.Element(); v.IsNull() || v.False() {
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

type validation struct {
	condition hcl.Expression
	message   string
}

// variables reads dir's variable blocks: their type constraints, defaults
// and validations.
// variable is what a test needs of a variable block.
type variable struct {
	ty cty.Type
	// typeDefaults are the optional attributes' defaults, which Terraform
	// applies to a value before converting it to ty.
	typeDefaults *typeexpr.Defaults
	def          *cty.Value
	checks       []validation
}

func variables(t *testing.T, dir string) map[string]*variable {
	t.Helper()
	vars := map[string]*variable{}
	file, diags := hclparse.NewParser().ParseHCLFile(filepath.Join(dir, "variables.tf"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, block := range file.Body.(*hclsyntax.Body).Blocks {
		if block.Type != "variable" {
			continue
		}
		name := block.Labels[0]
		ty, def, diags := typeexpr.TypeConstraintWithDefaults(block.Body.Attributes["type"].Expr)
		if diags.HasErrors() {
			t.Fatalf("%s: variable %s: type: %v", dir, name, diags)
		}
		vr := &variable{ty: ty, typeDefaults: def}
		vars[name] = vr
		if attr := block.Body.Attributes["default"]; attr != nil {
			v, diags := attr.Expr.Value(nil)
			if diags.HasErrors() {
				t.Fatalf("%s: variable %s: default: %v", dir, name, diags)
			}
			if def != nil {
				v = def.Apply(v)
			}
			if v, err := convert.Convert(v, ty); err == nil {
				vr.def = &v
			} else {
				t.Fatalf("%s: variable %s: default does not fit the type: %v", dir, name, err)
			}
		}
		for _, vb := range block.Body.Blocks {
			if vb.Type != "validation" {
				continue
			}
			msg, _ := vb.Body.Attributes["error_message"].Expr.Value(nil)
			vr.checks = append(vr.checks, validation{condition: vb.Body.Attributes["condition"].Expr, message: msg.AsString()})
		}
	}
	return vars
}

// failedValidations evaluates every validation of dir's variables with
// values (over the defaults) and returns the variables that fail, each with
// its error message.
func failedValidations(t *testing.T, dir string, values map[string]cty.Value) map[string]string {
	t.Helper()
	declared := variables(t, dir)
	vars := map[string]cty.Value{}
	for k, v := range declared {
		if v.def != nil {
			vars[k] = *v.def
		}
	}
	for k, v := range values {
		d, ok := declared[k]
		if !ok {
			t.Fatalf("%s declares no variable %s", dir, k)
		}
		if d.typeDefaults != nil {
			v = d.typeDefaults.Apply(v)
		}
		cv, err := convert.Convert(v, d.ty)
		if err != nil {
			t.Fatalf("%s: variable %s: %v", dir, k, err)
		}
		vars[k] = cv
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}, Functions: functions(dir)}
	failed := map[string]string{}
	for name, d := range declared {
		for _, v := range d.checks {
			got, diags := v.condition.Value(ctx)
			if diags.HasErrors() {
				t.Fatalf("%s: variable %s: condition: %v", dir, name, diags)
			}
			if got.False() {
				failed[name] = v.message
			}
		}
	}
	return failed
}

// locals evaluates dir's locals named by names, in order (each may use the
// ones before it), with var bound to vars.
func locals(t *testing.T, dir string, vars map[string]cty.Value, names ...string) map[string]cty.Value {
	t.Helper()
	file, diags := hclparse.NewParser().ParseHCLFile(filepath.Join(dir, "main.tf"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	exprs := map[string]hcl.Expression{}
	for _, block := range file.Body.(*hclsyntax.Body).Blocks {
		if block.Type == "locals" {
			for name, attr := range block.Body.Attributes {
				exprs[name] = attr.Expr
			}
		}
	}
	out := map[string]cty.Value{}
	for _, name := range names {
		expr, ok := exprs[name]
		if !ok {
			t.Fatalf("%s: no local %s", dir, name)
		}
		ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vars), "local": cty.ObjectVal(out)}, Functions: functions(dir)}
		v, diags := expr.Value(ctx)
		if diags.HasErrors() {
			t.Fatalf("%s: local %s: %v", dir, name, diags)
		}
		out[name] = v
	}
	return out
}

// The Cloud Function's GOMEMLIMIT is nine tenths of its memory, in whole
// MiB, for every unit available_memory accepts.
func TestGCPFunctionMemoryLimit(t *testing.T) {
	for memory, want := range map[string]string{
		"512M":  "439MiB",
		"512Mi": "460MiB",
		"1Gi":   "921MiB",
		"2G":    "1716MiB",
		"128Mi": "115MiB",
		"32Gi":  "29491MiB",
	} {
		got := locals(t, "modules/gcp-function", map[string]cty.Value{"available_memory": cty.StringVal(memory)}, "memory_bytes", "gomemlimit")["gomemlimit"]
		if got.AsString() != want {
			t.Errorf("memory %s: GOMEMLIMIT %s, want %s", memory, got.AsString(), want)
		}
	}
}

// Below 2G of memory (less than one vCPU) the Cloud Function runs on one P.
func TestGCPFunctionProcs(t *testing.T) {
	for memory, one := range map[string]bool{
		"128Mi":  true,
		"512M":   true,
		"1Gi":    true,
		"1907Mi": true,
		"2G":     false,
		"2Gi":    false,
		"32Gi":   false,
	} {
		got := locals(t, "modules/gcp-function", map[string]cty.Value{"available_memory": cty.StringVal(memory)}, "memory_bytes", "gomaxprocs")["gomaxprocs"]
		env := map[string]string{}
		for k, v := range got.AsValueMap() {
			env[k] = v.AsString()
		}
		if want := map[bool]map[string]string{true: {"GOMAXPROCS": "1"}, false: {}}[one]; !reflect.DeepEqual(env, want) {
			t.Errorf("memory %s: %v, want %v", memory, env, want)
		}
	}
}

func TestVariableValidations(t *testing.T) {
	examples, _ := filepath.Abs("../policies/examples")
	noPolicies := t.TempDir()
	os.WriteFile(filepath.Join(noPolicies, "README.md"), []byte("#"), 0o644)
	os.WriteFile(filepath.Join(noPolicies, "replicas_test.yaml"), []byte("cases: []"), 0o644)
	os.MkdirAll(filepath.Join(noPolicies, ".admitfn"), 0o755)
	os.WriteFile(filepath.Join(noPolicies, ".admitfn", "manifest.json"), []byte("{}"), 0o644)

	str, num, null := cty.StringVal, cty.NumberIntVal, cty.NullVal(cty.String)
	lambda := map[string]cty.Value{"lambda_zip": str("dist/lambda/admitfn-arm64.zip"), "policies_dir": str(examples)}
	gcf := map[string]cty.Value{"project_id": str("p"), "region": str("europe-west1"), "source_zip": str("dist/gcf/admitfn-source.zip"), "policies_dir": str(examples)}
	with := func(base map[string]cty.Value, kv ...any) map[string]cty.Value {
		out := map[string]cty.Value{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1].(cty.Value)
		}
		return out
	}
	rendered := renderJSON(t, "-p", "../policies/examples", "--url", "https://admitfn.invalid")
	webhook := func(configurations string, kv ...any) map[string]cty.Value {
		v, err := ctyjson.Unmarshal([]byte(configurations), mustImplied(t, configurations))
		if err != nil {
			t.Fatal(err)
		}
		return with(map[string]cty.Value{"configurations": v, "base_url": str("https://fn.example.com/token")}, kv...)
	}

	for _, tc := range []struct {
		name, dir string
		values    map[string]cty.Value
		fails     string // the variable whose validation fails; "" for none
	}{
		{"aws defaults", "modules/aws-lambda", lambda, ""},
		{"aws blank bundle key", "modules/aws-lambda", with(lambda, "bundle_public_key", str("")), "bundle_public_key"},
		{"aws bundle key", "modules/aws-lambda", with(lambda, "bundle_public_key", str("MCowBQYDK2VwAyEA0Nk7XUWWq0fVkwB73ojfH6g3ao9Cl17CnlNvsav0VQM=")), ""},
		{"aws timeout equal to the webhook's", "modules/aws-lambda", with(lambda, "timeout", num(10)), "timeout"},
		{"aws timeout above the webhook's", "modules/aws-lambda", with(lambda, "timeout", num(15), "webhook_timeout_seconds", num(12)), "timeout"},
		{"aws short webhook timeout", "modules/aws-lambda", with(lambda, "timeout", num(2), "webhook_timeout_seconds", num(3)), ""},
		{"aws webhook timeout over 30", "modules/aws-lambda", with(lambda, "webhook_timeout_seconds", num(31)), "webhook_timeout_seconds"},
		{"aws no policy files", "modules/aws-lambda", with(lambda, "policies_dir", str(noPolicies)), "policies_dir"},
		{"aws not a zip", "modules/aws-lambda", with(lambda, "lambda_zip", str("dist/lambda/bootstrap")), "lambda_zip"},
		{"aws package from S3", "modules/aws-lambda", with(lambda, "lambda_zip", null, "s3_bucket", str("releases"), "s3_key", str("admitfn-lambda_v0.1.0_arm64.zip")), ""},
		{"aws package from S3, versioned", "modules/aws-lambda", with(lambda, "lambda_zip", null, "s3_bucket", str("releases"), "s3_key", str("admitfn-lambda_v0.1.0_arm64.zip"), "s3_object_version", str("3HL4kqtJlcpXroDTDmJ")), ""},
		{"aws package both ways", "modules/aws-lambda", with(lambda, "s3_bucket", str("releases"), "s3_key", str("admitfn-lambda_v0.1.0_arm64.zip")), "lambda_zip"},
		{"aws no package", "modules/aws-lambda", with(lambda, "lambda_zip", null), "lambda_zip"},
		{"aws S3 key without a bucket", "modules/aws-lambda", with(lambda, "lambda_zip", null, "s3_key", str("admitfn-lambda_v0.1.0_arm64.zip")), "lambda_zip"},
		{"aws S3 key not a zip", "modules/aws-lambda", with(lambda, "lambda_zip", null, "s3_bucket", str("releases"), "s3_key", str("bootstrap")), "s3_key"},
		{"aws amd64 spelled the Go way", "modules/aws-lambda", with(lambda, "architectures", cty.ListVal([]cty.Value{str("amd64")})), "architectures"},
		{"aws zero concurrency", "modules/aws-lambda", with(lambda, "reserved_concurrent_executions", num(0)), "reserved_concurrent_executions"},
		{"aws reserved concurrency", "modules/aws-lambda", with(lambda, "reserved_concurrent_executions", num(50)), ""},
		{"aws memory too small", "modules/aws-lambda", with(lambda, "memory_size", num(64)), "memory_size"},
		{"aws odd log retention", "modules/aws-lambda", with(lambda, "cloudwatch_logs_retention_in_days", num(10)), "cloudwatch_logs_retention_in_days"},
		{"aws existing bucket without a name", "modules/aws-lambda", with(lambda, "create_bucket", cty.False, "bucket_name", null), "bucket_name"},
		{"aws existing bucket", "modules/aws-lambda", with(lambda, "create_bucket", cty.False, "bucket_name", str("my-policies")), ""},
		{"aws absolute prefix", "modules/aws-lambda", with(lambda, "policy_prefix", str("/prod")), "policy_prefix"},
		{"aws nested prefix", "modules/aws-lambda", with(lambda, "policy_prefix", str("clusters/prod")), ""},
		{"aws refresh interval not a duration", "modules/aws-lambda", with(lambda, "refresh_interval", str("soon")), "refresh_interval"},
		{"aws refresh interval off", "modules/aws-lambda", with(lambda, "refresh_interval", str("0")), ""},
		{"aws refresh interval compound", "modules/aws-lambda", with(lambda, "refresh_interval", str("1m30s")), ""},
		{"aws fractional rotation", "modules/aws-lambda", with(lambda, "token_rotation", cty.NumberFloatVal(1.5)), "token_rotation"},
		{"aws bad name", "modules/aws-lambda", with(lambda, "name", str("admit fn")), "name"},
		{"aws two architectures", "modules/aws-lambda", with(lambda, "architectures", cty.ListVal([]cty.Value{str("arm64"), str("x86_64")})), "architectures"},
		{"aws existing role", "modules/aws-lambda", with(lambda, "create_role", cty.False, "role_arn", str("arn:aws:iam::111122223333:role/admitfn")), ""},
		{"aws existing role without its ARN", "modules/aws-lambda", with(lambda, "create_role", cty.False), "role_arn"},
		{"aws role ARN with a created role", "modules/aws-lambda", with(lambda, "role_arn", str("arn:aws:iam::111122223333:role/admitfn")), "role_arn"},
		{"aws environment the module owns", "modules/aws-lambda", with(lambda, "environment_variables", cty.MapVal(map[string]cty.Value{"ADMITFN_TOKENS": str("x")})), "environment_variables"},
		{"aws more environment", "modules/aws-lambda", with(lambda, "environment_variables", cty.MapVal(map[string]cty.Value{"ADMITFN_LOG_LEVEL": str("debug")})), ""},
		{"aws subnets without security groups", "modules/aws-lambda", with(lambda, "vpc_subnet_ids", cty.ListVal([]cty.Value{str("subnet-1")})), "vpc_security_group_ids"},
		{"aws VPC", "modules/aws-lambda", with(lambda, "vpc_subnet_ids", cty.ListVal([]cty.Value{str("subnet-1")}), "vpc_security_group_ids", cty.ListVal([]cty.Value{str("sg-1")})), ""},
		{"aws bucket name with capitals", "modules/aws-lambda", with(lambda, "create_bucket", cty.False, "bucket_name", str("My_Policies")), "bucket_name"},

		{"gcp defaults", "modules/gcp-function", gcf, ""},
		{"gcp blank bundle key", "modules/gcp-function", with(gcf, "bundle_public_key", str(" \n")), "bundle_public_key"},
		{"gcp bundle key", "modules/gcp-function", with(gcf, "bundle_public_key", str("MCowBQYDK2VwAyEA0Nk7XUWWq0fVkwB73ojfH6g3ao9Cl17CnlNvsav0VQM=")), ""},
		{"gcp timeout equal to the webhook's", "modules/gcp-function", with(gcf, "timeout_seconds", num(10)), "timeout_seconds"},
		{"gcp old runtime", "modules/gcp-function", with(gcf, "runtime", str("go125")), "runtime"},
		{"gcp later runtime", "modules/gcp-function", with(gcf, "runtime", str("go127")), ""},
		{"gcp more warm instances than the maximum", "modules/gcp-function", with(gcf, "min_instance_count", num(5), "max_instance_count", num(2)), "min_instance_count"},
		{"gcp bad ingress", "modules/gcp-function", with(gcf, "ingress_settings", str("PUBLIC")), "ingress_settings"},
		{"gcp no policy files", "modules/gcp-function", with(gcf, "policies_dir", str(noPolicies)), "policies_dir"},
		{"gcp source from GCS", "modules/gcp-function", with(gcf, "source_zip", null, "source_bucket", str("releases"), "source_object", str("admitfn-gcf-source_v0.1.0.zip")), ""},
		{"gcp source from GCS, pinned", "modules/gcp-function", with(gcf, "source_zip", null, "source_bucket", str("releases"), "source_object", str("admitfn-gcf-source_v0.1.0.zip"), "source_generation", num(1700000000000000)), ""},
		{"gcp source both ways", "modules/gcp-function", with(gcf, "source_bucket", str("releases"), "source_object", str("admitfn-gcf-source_v0.1.0.zip")), "source_zip"},
		{"gcp no source", "modules/gcp-function", with(gcf, "source_zip", null), "source_zip"},
		{"gcp source object without a bucket", "modules/gcp-function", with(gcf, "source_zip", null, "source_object", str("admitfn-gcf-source_v0.1.0.zip")), "source_zip"},
		{"gcp source object not a zip", "modules/gcp-function", with(gcf, "source_zip", null, "source_bucket", str("releases"), "source_object", str("source.tar")), "source_object"},
		{"gcp upper-case name", "modules/gcp-function", with(gcf, "name", str("Admitfn")), "name"},
		{"gcp bad memory", "modules/gcp-function", with(gcf, "available_memory", str("lots")), "available_memory"},
		{"gcp existing service account", "modules/gcp-function", with(gcf, "create_service_account", cty.False, "service_account_email", str("admitfn@p.iam.gserviceaccount.com")), ""},
		{"gcp existing service account without its email", "modules/gcp-function", with(gcf, "create_service_account", cty.False), "service_account_email"},
		{"gcp environment the module owns", "modules/gcp-function", with(gcf, "environment_variables", cty.MapVal(map[string]cty.Value{"ADMITFN_TOKENS": str("x")})), "environment_variables"},
		{"gcp egress through the connector", "modules/gcp-function", with(gcf, "vpc_connector_egress_settings", str("SOME")), "vpc_connector_egress_settings"},

		{"bundle examples", "modules/bundle", map[string]cty.Value{"policies_dir": str(examples)}, ""},
		{"bundle without policy files", "modules/bundle", map[string]cty.Value{"policies_dir": str(noPolicies)}, "policies_dir"},

		{"webhook rendered", "modules/webhook", webhook(string(rendered)), ""},
		{"webhook pushed down", "modules/webhook", webhook(string(rendered), "push_down", cty.True), ""},
		{"webhook without push-down", "modules/webhook", webhook(string(renderJSON(t, "-p", "../policies/examples", "--url", "https://admitfn.invalid", "--push-down=false"))), ""},
		{"webhook rendered for another URL", "modules/webhook", webhook(string(rendered), "render_url", str("https://other.invalid")), "render_url"},
		{"webhook plain HTTP", "modules/webhook", webhook(string(rendered), "base_url", str("http://fn.example.com/token")), "base_url"},
		{"webhook trailing slash", "modules/webhook", webhook(string(rendered), "base_url", str("https://fn.example.com/token/")), "base_url"},
		{"webhook audit role", "modules/webhook", webhook(string(rendered), "audit_role", cty.True, "audit_role_name", str("admitfn-audit.prod")), ""},
		{"webhook audit role named in capitals", "modules/webhook", webhook(string(rendered), "audit_role", cty.True, "audit_role_name", str("Admitfn")), "audit_role_name"},
		{"webhook for a cluster", "modules/webhook", webhook(string(rendered), "cluster", str("prod-eu")), ""},
		{"webhook for a cluster not a DNS label", "modules/webhook", webhook(string(rendered), "cluster", str("Prod/EU")), "cluster"},
		{"webhook reader role", "modules/webhook", webhook(string(rendered), "reader_role", cty.True, "reader_subjects", cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"kind": str("Group"), "name": str("admitfn-readers"), "namespace": cty.NullVal(cty.String)})})), ""},
		{"webhook reader subject a ServiceAccount without its namespace", "modules/webhook", webhook(string(rendered), "reader_role", cty.True, "reader_subjects", cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"kind": str("ServiceAccount"), "name": str("admitfn"), "namespace": cty.NullVal(cty.String)})})), "reader_subjects"},
		{"webhook reader subject of no kind", "modules/webhook", webhook(string(rendered), "reader_subjects", cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"kind": str("Robot"), "name": str("x"), "namespace": cty.NullVal(cty.String)})})), "reader_subjects"},
		{"aws EKS access", "modules/aws-lambda", with(lambda, "eks_access", cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"cluster_name": str("prod"), "kubernetes_groups": cty.ListVal([]cty.Value{str("admitfn-readers")})})})), ""},
		{"aws EKS access as a system group", "modules/aws-lambda", with(lambda, "eks_access", cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"cluster_name": str("prod"), "kubernetes_groups": cty.ListVal([]cty.Value{str("system:masters")})})})), "eks_access"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed := failedValidations(t, tc.dir, tc.values)
			switch {
			case tc.fails == "" && len(failed) > 0:
				t.Errorf("validations failed: %v", failed)
			case tc.fails != "" && (len(failed) != 1 || failed[tc.fails] == ""):
				t.Errorf("want only %s to fail, got %v", tc.fails, failed)
			}
		})
	}
}

// --- the webhook module's input type against render's output

func renderJSON(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(admitfn, append([]string{"render", "-o", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("admitfn render %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

func mustImplied(t *testing.T, js string) cty.Type {
	t.Helper()
	ty, err := ctyjson.ImpliedType([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

// conforms checks that every key of v is an attribute of ty and that every
// attribute ty requires is in v, recursively, and returns the problems.
func conforms(at string, v any, ty cty.Type) []string {
	var problems []string
	switch {
	case ty.IsObjectType():
		m, ok := v.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: render emits %T, the module wants an object", at, v)}
		}
		for k, sub := range m {
			if !ty.HasAttribute(k) {
				problems = append(problems, fmt.Sprintf("%s.%s: render emits it, the module's type does not declare it", at, k))
				continue
			}
			problems = append(problems, conforms(at+"."+k, sub, ty.AttributeType(k))...)
		}
		for k := range ty.AttributeTypes() {
			if _, ok := m[k]; !ok && !ty.AttributeOptional(k) {
				problems = append(problems, fmt.Sprintf("%s.%s: the module requires it, render does not emit it", at, k))
			}
		}
	case ty.IsListType():
		l, ok := v.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: render emits %T, the module wants a list", at, v)}
		}
		for i, sub := range l {
			problems = append(problems, conforms(fmt.Sprintf("%s[%d]", at, i), sub, ty.ElementType())...)
		}
	case ty.IsMapType():
		m, ok := v.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: render emits %T, the module wants a map", at, v)}
		}
		for k, sub := range m {
			problems = append(problems, conforms(at+"["+k+"]", sub, ty.ElementType())...)
		}
	case ty == cty.String:
		if _, ok := v.(string); !ok {
			problems = append(problems, fmt.Sprintf("%s: render emits %T, the module wants a string", at, v))
		}
	case ty == cty.Number:
		if _, ok := v.(float64); !ok {
			problems = append(problems, fmt.Sprintf("%s: render emits %T, the module wants a number", at, v))
		}
	}
	return problems
}

func TestWebhookInputIsWhatRenderEmits(t *testing.T) {
	configurations := variables(t, "modules/webhook")["configurations"]
	ty := configurations.ty
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644)

	// Bundles that between them make render emit every field it can:
	// validating and mutating groups, object selectors, Ignore groups,
	// caBundle, kube-system included, another timeout.
	libraries, _ := filepath.Glob("../policies/library/*")
	cases := [][]string{
		{"-p", "../policies/examples", "--url", "https://admitfn.invalid"},
		{"-p", "../policies/examples", "--url", "https://admitfn.invalid", "--ca-bundle", ca, "--include-kube-system", "--timeout", "5", "--name", "other"},
	}
	for _, lib := range libraries {
		if fi, err := os.Stat(lib); err == nil && fi.IsDir() {
			cases = append(cases, []string{"-p", lib, "--url", "https://admitfn.invalid"})
		}
	}
	seen := map[string]bool{}
	for _, args := range cases {
		out := renderJSON(t, args...)
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		for _, p := range conforms("configurations", v, ty) {
			t.Errorf("%v: %s", args, p)
		}
		// Terraform accepts it: the JSON converts to the type.
		val, err := ctyjson.Unmarshal(out, mustImplied(t, string(out)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := convert.Convert(configurations.typeDefaults.Apply(val), ty); err != nil {
			t.Errorf("%v: does not convert to the module's type: %v", args, err)
		}
		collectKeys("", v, seen)
	}
	// The optional fields the module maps must each be emitted by some
	// case, so the test really covers them.
	for _, k := range []string{"items.webhooks.clientConfig.caBundle", "items.webhooks.reinvocationPolicy", "items.webhooks.objectSelector", "items.webhooks.namespaceSelector.matchExpressions", "items.webhooks.rules.scope", "items.metadata.labels"} {
		if !seen[k] {
			t.Errorf("no case makes render emit %s", k)
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("render emitted: %s", strings.Join(keys, " "))
}

// collectKeys records the dotted paths of v's keys, list indexes dropped:
// "items.webhooks.clientConfig.url".
func collectKeys(prefix string, v any, seen map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			seen[p] = true
			collectKeys(p, sub, seen)
		}
	case []any:
		for _, sub := range x {
			collectKeys(prefix, sub, seen)
		}
	}
}

// The webhook module's ClusterRoles grant exactly what the docs' do, which
// the end-to-end tests run with: audit, docs/audit-rbac.yaml (admitfn
// apply --cluster); reader, docs/cluster-rbac.yaml (a function with
// cluster access), its param rules being reader_param_resources' default.
func TestRolesMatchTheDocs(t *testing.T) {
	readerParams := *variables(t, "modules/webhook")["reader_param_resources"].def
	for role, doc := range map[string]string{"audit": "../docs/audit-rbac.yaml", "reader": "../docs/cluster-rbac.yaml"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var parsed struct {
			Rules []struct {
				APIGroups []string `json:"apiGroups"`
				Resources []string `json:"resources"`
				Verbs     []string `json:"verbs"`
			} `json:"rules"`
		}
		if err := yaml.Unmarshal(raw, &parsed); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range parsed.Rules {
			want = append(want, fmt.Sprint(r.APIGroups, r.Resources, r.Verbs))
		}
		got := moduleRoleRules(t, role)
		if role == "reader" {
			for _, p := range readerParams.AsValueSlice() {
				got = append(got, fmt.Sprint(stringList(p.GetAttr("api_groups")), stringList(p.GetAttr("resources")), []string{"get", "list", "watch"}))
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("kubernetes_cluster_role_v1.%s rules:\n%s\nwant (%s)\n%s", role, stringsJoin(got), doc, stringsJoin(want))
		}
	}
}

func stringList(v cty.Value) []string {
	var out []string
	for _, s := range v.AsValueSlice() {
		out = append(out, s.AsString())
	}
	return out
}

func stringsJoin(lines []string) string { return strings.Join(lines, "\n") }

// moduleRoleRules are the static rules of the webhook module's ClusterRole
// resource name.
func moduleRoleRules(t *testing.T, name string) []string {
	t.Helper()
	file, diags := hclparse.NewParser().ParseHCLFile("modules/webhook/main.tf")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, block := range file.Body.(*hclsyntax.Body).Blocks {
		if block.Type != "resource" || block.Labels[0] != "kubernetes_cluster_role_v1" || block.Labels[1] != name {
			continue
		}
		for _, rule := range block.Body.Blocks {
			if rule.Type != "rule" {
				continue
			}
			list := func(attr string) []string {
				v, diags := rule.Body.Attributes[attr].Expr.Value(nil)
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				return stringList(v)
			}
			got = append(got, fmt.Sprint(list("api_groups"), list("resources"), list("verbs")))
		}
	}
	return got
}

// The webhook module puts the cluster in the URLs as admitfn render
// --cluster does.
func TestWebhookModuleClusterURL(t *testing.T) {
	for _, tc := range []struct {
		cluster cty.Value
		want    string
	}{
		{cty.NullVal(cty.String), "https://fn.example.com/token"},
		{cty.StringVal("prod-eu"), "https://fn.example.com/token/clusters/prod-eu"},
	} {
		vars := map[string]cty.Value{"base_url": cty.StringVal("https://fn.example.com/token"), "cluster": tc.cluster,
			"configurations": cty.ObjectVal(map[string]cty.Value{"items": cty.EmptyTupleVal})}
		got := locals(t, "modules/webhook", vars, "validating", "mutating", "url_base")["url_base"]
		if got.AsString() != tc.want {
			t.Errorf("cluster %#v: %s, want %s", tc.cluster, got.AsString(), tc.want)
		}
	}
	// render's URLs for the cluster are the module's.
	out := renderJSON(t, "-p", "../policies/examples", "--url", "https://fn.example.com/token", "--cluster", "prod-eu")
	if !bytes.Contains(out, []byte(`"url": "https://fn.example.com/token/clusters/prod-eu/validate/`)) {
		t.Errorf("admitfn render --cluster: %s", out)
	}
}

// examples/tests/published-webhooks.json, which the examples' and the webhook
// module's tests read as the bucket would hold it, is what admitfn push
// publishes for the example bundle (.admitfn/webhooks.json): the examples
// go from a push to a cluster in one apply. go test ./terraform -update
// rewrites it.
func TestExampleWebhooksAreWhatPushPublishes(t *testing.T) {
	const path = "examples/tests/published-webhooks.json"
	dir := filepath.Join(t.TempDir(), "published")
	if out, err := exec.Command(admitfn, "push", "-p", "../policies/examples", "--to", dir).CombinedOutput(); err != nil {
		t.Fatalf("admitfn push: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(dir, ".admitfn", "webhooks.json"))
	if err != nil {
		t.Fatal(err)
	}
	// What render prints for the URL push renders with.
	if rendered := renderJSON(t, "-p", "../policies/examples", "--url", "https://admitfn.invalid"); !bytes.Equal(rendered, want) {
		t.Errorf("push published webhook configurations that admitfn render does not print:\n%s\nwant\n%s", want, rendered)
	}
	got, err := os.ReadFile(path)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is not what admitfn push publishes for policies/examples (%v): go test ./terraform -update rewrites it", path, err)
	}
}
