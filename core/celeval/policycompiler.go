package celeval

import (
	"fmt"

	"github.com/google/cel-go/cel"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval/internal/envs"
)

// composited is upstream's CompositedCompiler on the environment of opts:
// upstream's composition (the `variables` object, its stored variables,
// their lazy evaluation and cost) with a compiler of that one environment.
func composited(set *envs.Set, opts plugincel.OptionalVariableDeclarations, kind programKind) (*plugincel.CompositedCompiler, error) {
	base, err := set.For(opts)
	if err != nil {
		return nil, err
	}
	c, err := plugincel.NewCompositedCompilerForTypeChecking(base)
	if err != nil {
		return nil, err
	}
	c.Compiler = envCompiler{c, opts, kind}
	return c, nil
}

// PolicyCompiler compiles the expressions of one policy, as upstream's
// CompositedCompiler of the policy does: its variables first, then the
// expressions that read them, each in the environment of the optional
// variables it is compiled with.
type PolicyCompiler interface {
	plugincel.Compiler
	CompileAndStoreVariable(v plugincel.NamedExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult
	// Composition is the compiler whose composition context evaluates
	// the expressions compiled with opts.
	Composition(opts plugincel.OptionalVariableDeclarations) (*plugincel.CompositedCompiler, error)
}

// ForPolicy returns the compiler of one policy. A policy without variables
// uses the compilers all such policies share; one with variables gets its
// own, on top of the shared environments: upstream's
// plugincel.NewCompositedCompiler would build all eight environments for
// each such policy (each with a type checker of every function), which was
// most of the time compiling a bundle took.
func (c *Compiler) ForPolicy(hasVariables bool) PolicyCompiler {
	return &policyCompiler{c: c, hasVariables: hasVariables, envs: map[plugincel.OptionalVariableDeclarations]*plugincel.CompositedCompiler{}}
}

type policyCompiler struct {
	c            *Compiler
	hasVariables bool
	envs         map[plugincel.OptionalVariableDeclarations]*plugincel.CompositedCompiler
	variables    []storedVariable
}

type storedVariable struct {
	name   string
	result plugincel.CompilationResult
}

func (p *policyCompiler) Composition(opts plugincel.OptionalVariableDeclarations) (*plugincel.CompositedCompiler, error) {
	if cc, ok := p.envs[opts]; ok {
		return cc, nil
	}
	if !p.hasVariables {
		cc, err := p.c.shared[opts]()
		if err == nil {
			p.envs[opts] = cc
		}
		return cc, err
	}
	cc, err := composited(p.c.envs, opts, p.c.programs())
	if err != nil {
		return nil, err
	}
	for _, v := range p.variables {
		adoptVariable(cc, v.name, v.result)
	}
	p.envs[opts] = cc
	return cc, nil
}

func (p *policyCompiler) CompileCELExpression(accessor plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	cc, err := p.Composition(opts)
	if err != nil {
		return internalError(accessor, fmt.Sprintf("unexpected error loading CEL environment: %v", err))
	}
	return cc.CompileCELExpression(accessor, opts, mode)
}

// CompileAndStoreVariable compiles v in the environment of opts and stores
// it in every environment of the policy: upstream's one compiler serves all
// expressions of a policy, so an expression reads each variable as compiled
// for the policy (a message expression, compiled without `authorizer`,
// thus reads a variable that uses it).
func (p *policyCompiler) CompileAndStoreVariable(v plugincel.NamedExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	if !p.hasVariables {
		return internalError(v, "variable "+v.GetName()+" stored in the compiler of a policy without variables")
	}
	cc, err := p.Composition(opts)
	if err != nil {
		return internalError(v, fmt.Sprintf("unexpected error loading CEL environment: %v", err))
	}
	r := cc.CompileAndStoreVariable(v, opts, mode)
	for other, dst := range p.envs {
		if other != opts {
			adoptVariable(dst, v.GetName(), r)
		}
	}
	p.variables = append(p.variables, storedVariable{v.GetName(), r})
	return r
}

func internalError(accessor plugincel.ExpressionAccessor, detail string) plugincel.CompilationResult {
	return failed(accessor, apiservercel.ErrorTypeInternal, detail, nil)
}

// failed is a compilation result with an error, as upstream's compiler
// returns them.
func failed(accessor plugincel.ExpressionAccessor, typ apiservercel.ErrorType, detail string, cause error) plugincel.CompilationResult {
	return plugincel.CompilationResult{Error: &apiservercel.Error{Type: typ, Detail: detail, Cause: cause}, ExpressionAccessor: accessor}
}

// envCompiler compiles as upstream's compiler does, in the one environment
// of its composited compiler.
type envCompiler struct {
	composition *plugincel.CompositedCompiler
	opts        plugincel.OptionalVariableDeclarations
	kind        programKind
}

// programKind says what an environment keeps with its programs.
type programKind struct {
	// bounded keeps what an expression's cost bound needs with its
	// program (costbound.go, internal/cost), and what linear tracking
	// needs (lineartrack.go), from lists of linearFrom entries; noBounds uses
	// the first for linear tracking only.
	bounded    bool
	linearFrom int
	noBounds   bool
}

func (c envCompiler) CompileCELExpression(accessor plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	fail := func(detail string, typ apiservercel.ErrorType, cause error) plugincel.CompilationResult {
		return failed(accessor, typ, detail, cause)
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
	prog = planned(prog)
	if c.kind.bounded {
		prog = &boundedProgram{Program: prog, env: env, expr: accessor.GetExpression(), linearFrom: c.kind.linearFrom, noBounds: c.kind.noBounds}
	}
	return plugincel.CompilationResult{Program: prog, ExpressionAccessor: accessor, OutputType: ast.OutputType()}
}

// adoptVariable stores a variable compiled in another environment of the
// policy in dst: the same program, and the same type for the expressions dst
// compiles.
func adoptVariable(dst *plugincel.CompositedCompiler, name string, compiled plugincel.CompilationResult) {
	envCompiler := dst.Compiler
	dst.Compiler = precompiled(compiled)
	dst.CompileAndStoreVariable(&variableName{name}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions)
	dst.Compiler = envCompiler
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
