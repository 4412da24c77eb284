package lint

import (
	"fmt"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/parser"

	"github.com/admitfn/admitfn/core/celeval"
)

// celParser parses expressions for checks that need their shape only.
var celParser = func() *parser.Parser {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true))
	if err != nil {
		panic(err)
	}
	return p
}()

// amplifyingArg names, for each function that can build a value far larger
// than its arguments, the argument that decides by how much, counted as
// the call's arguments are (a method's receiver is not one).
var amplifyingArg = map[string]struct {
	arg  int
	what string
}{
	"replace":     {1, "a replacement"},
	"join":        {0, "a separator"},
	"format":      {0, "arguments"},
	"lists.range": {0, "a length"},
}

// checkAmplification warns about calls whose result grows with what the
// request or params hold, times itself: a 248 KB ConfigMap can make one
// replace ask for 3.8 GB, at a cost kube-apiserver counts by the receiver
// alone.
func checkAmplification(field, expr string, at func(rule, field, msg string)) {
	parsed, errs := celParser.Parse(common.NewTextSource(expr))
	if len(errs.GetErrors()) > 0 {
		return // compiling reports it
	}
	for _, call := range ast.MatchDescendants(ast.NavigateAST(parsed), func(e ast.NavigableExpr) bool { return e.Kind() == ast.CallKind }) {
		c := call.AsCall()
		name := c.FunctionName()
		if c.IsMemberFunction() && c.Target().Kind() == ast.IdentKind {
			if q := c.Target().AsIdent() + "." + name; amplifyingArg[q].what != "" {
				name = q // lists.range, a namespaced function
			}
		}
		a, ok := amplifyingArg[name]
		if !ok || a.arg >= len(c.Args()) || constant(c.Args()[a.arg]) {
			continue
		}
		at(AmplifyingCall, field, fmt.Sprintf("%s() with %s taken from the request or params can build a value many times the object's size: admitfn stops any call at %d MiB and charges what it builds beyond its input to the cost budget, which kube-apiserver does not (there it can exhaust the apiserver's memory)",
			name, a.what, celeval.MaxResultBytes>>20))
	}
}

// constant reports whether e is a literal, or a list of literals.
func constant(e ast.Expr) bool {
	switch e.Kind() {
	case ast.LiteralKind:
		return true
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			if !constant(el) {
				return false
			}
		}
		return true
	}
	return false
}
