package validate

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// The environments here are upstream's, declared as its compiler declares
// them (k8s.io/apiserver/pkg/admission/plugin/cel: createEnvForOpts and
// compiler.CompileCELExpression, whose recipe is unexported), built in
// another order: upstream extends the base environment with `variables`,
// then each of eight combinations of optional variables, for every policy;
// admitfn extends the base with a combination once per process, and a
// policy's `variables` on top of the one or two combinations it uses. Both
// layers are DeclTypeProviders of distinct type names that defer to the
// layer below, so the order changes no lookup. TestCompileMatchesUpstream
// compiles every bundle of the repository both ways.

// envFor extends base with the variables opts declares, as upstream's
// createEnvForOpts does (HasPatchTypes aside: mutating policies keep
// upstream's compiler).
func envFor(base *environment.EnvSet, opts plugincel.OptionalVariableDeclarations) (*environment.EnvSet, error) {
	if opts.HasPatchTypes {
		return nil, fmt.Errorf("environment with patch types: not built here")
	}
	requestType, namespaceType := plugincel.BuildRequestType(), plugincel.BuildNamespaceType()
	envOpts := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
		cel.Variable(plugincel.RequestVarName, requestType.CelType()),
	}
	if opts.HasParams {
		envOpts = append(envOpts, cel.Variable(plugincel.ParamsVarName, cel.DynType))
	}
	if opts.HasAuthorizer {
		envOpts = append(envOpts,
			cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType),
			cel.Variable(plugincel.RequestResourceAuthorizerVarName, library.ResourceCheckType))
	}
	env, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        envOpts,
		DeclTypes:         []*apiservercel.DeclType{namespaceType, requestType},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, fmt.Errorf("environment misconfigured: %w", err)
	}
	return env, nil
}

// composited is upstream's CompositedCompiler on the environment of opts:
// upstream's composition (the `variables` object, its stored variables,
// their lazy evaluation and cost) with a compiler of that one environment.
func composited(env func() (*environment.EnvSet, error), opts plugincel.OptionalVariableDeclarations) (*plugincel.CompositedCompiler, error) {
	base, err := env()
	if err != nil {
		return nil, err
	}
	c, err := plugincel.NewCompositedCompilerForTypeChecking(base)
	if err != nil {
		return nil, err
	}
	c.Compiler = envCompiler{c, opts}
	return c, nil
}

// envCompiler compiles as upstream's compiler does, in the one environment
// of its composited compiler.
type envCompiler struct {
	composition *plugincel.CompositedCompiler
	opts        plugincel.OptionalVariableDeclarations
}

func (c envCompiler) CompileCELExpression(accessor plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	fail := func(detail string, typ apiservercel.ErrorType, cause error) plugincel.CompilationResult {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: typ, Detail: detail, Cause: cause}, ExpressionAccessor: accessor}
	}
	if opts != c.opts {
		return fail(fmt.Sprintf("unexpected error loading CEL environment: compiler for %+v asked for %+v", c.opts, opts), apiservercel.ErrorTypeInternal, nil)
	}
	env, err := c.composition.Env(mode)
	if err != nil {
		return fail(fmt.Sprintf("unexpected error loading CEL environment: %v", err), apiservercel.ErrorTypeInternal, nil)
	}
	ast, issues := env.Compile(accessor.GetExpression())
	if issues != nil {
		return fail("compilation failed: "+issues.String(), apiservercel.ErrorTypeInvalid, apiservercel.NewCompilationError(issues))
	}
	returnTypes := accessor.ReturnTypes()
	found := false
	for _, t := range returnTypes {
		if ast.OutputType().IsExactType(t) || cel.AnyType.IsExactType(t) {
			found = true
			break
		}
	}
	if !found {
		reason := fmt.Sprintf("must evaluate to one of %v but got %v", returnTypes, ast.OutputType().String())
		if len(returnTypes) == 1 {
			reason = fmt.Sprintf("must evaluate to %v but got %v", returnTypes[0].String(), ast.OutputType().String())
		}
		return fail(reason, apiservercel.ErrorTypeInvalid, nil)
	}
	if _, err := cel.AstToCheckedExpr(ast); err != nil {
		return fail("unexpected compilation error: "+err.Error(), apiservercel.ErrorTypeInternal, nil)
	}
	prog, err := env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return fail("program instantiation failed: "+err.Error(), apiservercel.ErrorTypeInternal, nil)
	}
	return plugincel.CompilationResult{Program: prog, ExpressionAccessor: accessor, OutputType: ast.OutputType()}
}

// adoptVariable stores a variable compiled by another of the policy's
// compilers in dst, as upstream's one compiler serves every expression of a
// policy: the same program, and the same type for the expressions dst
// compiles. A message expression thus reads a variable that uses
// `authorizer`, which its own environment lacks, as upstream's does.
func adoptVariable(dst *plugincel.CompositedCompiler, name string, compiled plugincel.CompilationResult) {
	own := dst.Compiler
	dst.Compiler = precompiled(compiled)
	dst.CompileAndStoreVariable(&variableName{name}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions)
	dst.Compiler = own
}

// precompiled answers every compilation with one result.
type precompiled plugincel.CompilationResult

func (p precompiled) CompileCELExpression(plugincel.ExpressionAccessor, plugincel.OptionalVariableDeclarations, environment.Type) plugincel.CompilationResult {
	return plugincel.CompilationResult(p)
}

type variableName struct{ name string }

func (v *variableName) GetName() string          { return v.name }
func (v *variableName) GetExpression() string    { return "" }
func (v *variableName) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }
