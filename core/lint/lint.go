// Package lint reviews a loaded bundle beyond what loading checks: it
// type-checks ValidatingAdmissionPolicy expressions against the schemas of
// the built-in kinds they match (kube-apiserver's status.typeChecking), and
// warns about what works differently, or not at all, in a function.
package lint

import (
	"fmt"
	"k8s.io/apimachinery/pkg/util/version"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/admitfn/admitfn/core/policy"
)

// Severity says whether a finding fails the lint.
type Severity string

const (
	Error   Severity = "error"   // the expression is wrong for the objects it will see
	Warning Severity = "warning" // it works, differently than one may think
)

// Rule is one kind of finding. Every finding of a rule has its severity.
type Rule struct {
	ID       string
	Severity Severity
	Summary  string
}

// Rules are the kinds of finding lint makes, for tools that list them (a
// SARIF log names them).
var Rules = []Rule{
	{TypeCheck, Error, "An expression does not type-check against the schema of a kind its policy matches, as kube-apiserver reports in status.typeChecking."},
	{AmplifyingCall, Warning, "A call builds a value many times what it is given from the request or params."},
	{NoAuthorizer, Warning, "An expression uses the authorizer, which a function does not have."},
	{NamespaceObject, Warning, "An expression reads namespaceObject beyond metadata.name, which a function is not sent."},
	{UncheckedRule, Warning, "A rule matches kinds whose schemas are unknown here (wildcards, custom resources), so its expressions are not type-checked."},
	{WebhookGroups, Warning, "The bindings make many webhook groups, each a call of its own."},
	{ParamSource, Warning, "A param kind's objects come from somewhere else than one may think: the bundle, or the cluster."},
	{MutationShape, Error, "A mutation builds a field that none of the kinds its policy matches has, or a value of another type: kube-apiserver fails it on every request it acts on."},
	{KubernetesVersion, Warning, "An expression uses a CEL library or function a cluster of the version linted for does not have: it refuses the policy in-cluster, and a webhook configuration that pushes the expression down."},
}

// The rule IDs.
const (
	TypeCheck       = "type-check"
	AmplifyingCall  = "amplifying-call"
	NoAuthorizer    = "no-authorizer"
	NamespaceObject = "namespace-object"
	UncheckedRule   = "unchecked-rule"
	WebhookGroups   = "webhook-groups"
	ParamSource     = "param-source"
	MutationShape   = "mutation-shape"
	// KubernetesVersion: see version.go.
	KubernetesVersion = "kubernetes-version"
)

func severity(rule string) Severity {
	for _, r := range Rules {
		if r.ID == rule {
			return r.Severity
		}
	}
	panic("lint: unknown rule " + rule)
}

// Finding is one problem, located in the bundle.
type Finding struct {
	Rule     string
	Severity Severity
	Origin   policy.Origin
	Object   string // "ValidatingAdmissionPolicy replicas.example.com"
	Field    string // "spec.validations[0].expression"; empty for the whole object
	Message  string
}

func (f Finding) String() string {
	where := f.Object
	if f.Field != "" {
		where += ": " + f.Field
	}
	if f.Origin.File == "" {
		return fmt.Sprintf("%s: %s: %s", f.Severity, where, f.Message)
	}
	return fmt.Sprintf("%s: %s: %s: %s", f.Origin, f.Severity, where, f.Message)
}

// MaxGroups is how many webhook groups a bundle may need before lint warns:
// each group is a webhook kube-apiserver calls on its own.
const MaxGroups = 4

// Options say what the deployment the bundle is for can do.
type Options struct {
	// ClusterAccess: the function reads the clusters it serves
	// (docs/cluster.md): namespaceObject is whole, the authorizer is
	// there, and param kinds the bundle carries no object of are read from
	// the cluster.
	ClusterAccess bool
	// KubernetesVersion, when set, is the version of the clusters the
	// bundle is for: expressions they would refuse are found.
	KubernetesVersion *version.Version
}

// Set lints the parsed bundle b for a deployment without cluster access.
func Set(b *policy.Set) []Finding { return SetWith(b, Options{}) }

// SetWith lints the parsed bundle b for a deployment that can do what opts
// say.
func SetWith(b *policy.Set, opts Options) []Finding {
	mapper := restMapper(scheme.Scheme)
	tc := typeChecker(mapper)
	var out []Finding
	for _, p := range b.Policies {
		at := func(rule, field, msg string) {
			out = append(out, Finding{rule, severity(rule), b.Origin("ValidatingAdmissionPolicy", p.Name), "ValidatingAdmissionPolicy " + p.Name, field, msg})
		}
		for _, w := range typeCheck(tc, p) {
			at(TypeCheck, w.FieldRef, strings.TrimSpace(w.Warning))
		}
		checkRules(p.Spec.MatchConstraints, mapper, at)
		for _, e := range validatingExpressions(p) {
			checkExpression(e.field, e.expression, opts, at)
		}
		if opts.KubernetesVersion != nil {
			checkVersion(opts.KubernetesVersion, p.Spec.ParamKind != nil, false, p.Spec.Variables, validatingExpressions(p), at)
		}
	}
	resolver := &builtins{scheme: scheme.Scheme, cache: map[schema.GroupVersionKind]*spec.Schema{}}
	crds := bundleCRDs(b, resolver)
	for _, p := range b.MutatingPolicies {
		at := func(rule, field, msg string) {
			out = append(out, Finding{rule, severity(rule), b.Origin("MutatingAdmissionPolicy", p.Name), "MutatingAdmissionPolicy " + p.Name, field, msg})
		}
		if kinds := mutationKinds(p, mapper, resolver, crds); len(kinds) > 0 {
			for i, m := range p.Spec.Mutations {
				switch {
				case m.ApplyConfiguration != nil:
					checkApplyConfiguration(fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), m.ApplyConfiguration.Expression, kinds, at)
				case m.JSONPatch != nil:
					checkJSONPatch(fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), m.JSONPatch.Expression, kinds, at)
				}
			}
		}
		for _, e := range mutatingExpressions(p) {
			checkExpression(e.field, e.expression, opts, at)
		}
		if opts.KubernetesVersion != nil {
			checkVersion(opts.KubernetesVersion, p.Spec.ParamKind != nil, true, p.Spec.Variables, mutatingExpressions(p), at)
		}
	}
	out = append(out, paramSources(b, opts)...)
	if n := len(b.Groups()) + len(b.MutatingGroups()); n > MaxGroups {
		out = append(out, Finding{Rule: WebhookGroups, Severity: Warning, Object: "bundle", Message: fmt.Sprintf(
			"the bindings' selectors, failure policies and reinvocation policies make %d webhook groups: kube-apiserver calls the function once per matching group; bindings that share selectors share a group", n)})
	}
	return out
}

// typeChecker is kube-apiserver's type checker over the built-in kinds.
func typeChecker(mapper meta.RESTMapper) *validating.TypeChecker {
	return &validating.TypeChecker{SchemaResolver: &builtins{scheme: scheme.Scheme, cache: map[schema.GroupVersionKind]*spec.Schema{}}, RestMapper: mapper}
}

// typeCheck is tc.Check(p), kube-apiserver's type check, asked first for
// all of p's expressions at once. Upstream compiles the policy's variables
// and builds its environment again for every expression and kind it
// checks, which was most of lint's time; the expressions as the elements
// of one list literal, each under dyn() (the environment wants a list's
// elements of one type), type-check without issue exactly when each one
// does (each element is checked on its own, in the same environment), so a
// clean policy costs one check per kind. A policy whose list reports anything is checked by upstream
// expression by expression, for its own findings. Every expression here
// parses on its own (lint runs on what compiled), so none can reach into
// its neighbours.
func typeCheck(tc *validating.TypeChecker, p *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	var exprs []string
	for _, v := range p.Spec.Validations {
		exprs = append(exprs, v.Expression)
		if v.MessageExpression != "" {
			exprs = append(exprs, v.MessageExpression)
		}
	}
	if len(exprs) > 1 {
		var list strings.Builder
		list.WriteString("[")
		for i, e := range exprs {
			if i > 0 {
				list.WriteString(",")
			}
			list.WriteString("\ndyn(\n" + e + "\n)\n")
		}
		list.WriteString("]")
		if len(tc.CheckExpression(tc.CreateContext(p), list.String())) == 0 {
			return nil
		}
	}
	return tc.Check(p)
}

type expression struct{ field, expression string }

// headExpressions are the variables and match conditions both kinds of
// policy have.
func headExpressions(vars []admissionregistrationv1.Variable, conds []admissionregistrationv1.MatchCondition) []expression {
	var out []expression
	for i, v := range vars {
		out = append(out, expression{fmt.Sprintf("spec.variables[%d].expression", i), v.Expression})
	}
	for i, m := range conds {
		out = append(out, expression{fmt.Sprintf("spec.matchConditions[%d].expression", i), m.Expression})
	}
	return out
}

func validatingExpressions(p *admissionregistrationv1.ValidatingAdmissionPolicy) []expression {
	out := headExpressions(p.Spec.Variables, p.Spec.MatchConditions)
	for i, v := range p.Spec.Validations {
		out = append(out, expression{fmt.Sprintf("spec.validations[%d].expression", i), v.Expression})
		if v.MessageExpression != "" {
			out = append(out, expression{fmt.Sprintf("spec.validations[%d].messageExpression", i), v.MessageExpression})
		}
	}
	for i, a := range p.Spec.AuditAnnotations {
		out = append(out, expression{fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression})
	}
	return out
}

func mutatingExpressions(p *admissionregistrationv1.MutatingAdmissionPolicy) []expression {
	out := headExpressions(p.Spec.Variables, p.Spec.MatchConditions)
	for i, m := range p.Spec.Mutations {
		switch {
		case m.ApplyConfiguration != nil:
			out = append(out, expression{fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), m.ApplyConfiguration.Expression})
		case m.JSONPatch != nil:
			out = append(out, expression{fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), m.JSONPatch.Expression})
		}
	}
	return out
}

var (
	authorizerRef = regexp.MustCompile(`\bauthorizer\b`)
	// namespaceObject and the field path after it.
	namespaceRef = regexp.MustCompile(`\bnamespaceObject((?:\.\??[A-Za-z_][A-Za-z0-9_]*)*)`)
)

// checkExpression warns about variables that a function has only in part,
// and about calls that can build far more than they are given.
func checkExpression(field, expr string, opts Options, at func(rule, field, msg string)) {
	checkAmplification(field, expr, at)
	if opts.ClusterAccess {
		return
	}
	if authorizerRef.MatchString(expr) {
		at(NoAuthorizer, field, "admitfn has no authorizer (kube-apiserver authorizes, the function cannot): every authorizer check fails, and the failure policy decides")
	}
	for _, m := range namespaceRef.FindAllStringSubmatch(expr, -1) {
		path := strings.ReplaceAll(m[1], "?", "")
		if !strings.HasPrefix(path, ".metadata.name") {
			at(NamespaceObject, field, fmt.Sprintf("namespaceObject%s: a function is not sent the namespace, so namespaceObject holds only metadata.name; select on namespace labels with the binding's namespaceSelector", m[1]))
		}
	}
}

// checkRules warns about rules the type checker cannot use: wildcards, and
// resources that are not built in (custom resources: their schemas live in
// the cluster).
func checkRules(mr *admissionregistrationv1.MatchResources, mapper meta.RESTMapper, at func(rule, field, msg string)) {
	if mr == nil {
		return
	}
	for i, r := range mr.ResourceRules {
		field := fmt.Sprintf("spec.matchConstraints.resourceRules[%d]", i)
		if wild(r.APIGroups) || wild(r.APIVersions) || wild(r.Resources) {
			at(UncheckedRule, field, "wildcards: the expressions are not type-checked for the kinds this rule matches")
			continue
		}
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					if strings.Contains(res, "/") {
						continue
					}
					gvr := schema.GroupVersionResource{Group: g, Version: v, Resource: res}
					if _, err := mapper.KindFor(gvr); err != nil {
						at(UncheckedRule, field, fmt.Sprintf("%s is not a built-in resource: the expressions are not type-checked against it", gvr))
					}
				}
			}
		}
	}
}

func wild(values []string) bool {
	for _, v := range values {
		if strings.Contains(v, "*") {
			return true
		}
	}
	return false
}

// paramSources says, for each param kind the bindings use, where a
// deployment finds its objects when that may surprise: with cluster
// access, the bundle's objects of a kind win over the cluster's; without
// it, a kind the bundle carries nothing of has no params at all.
func paramSources(b *policy.Set, opts Options) []Finding {
	counts := map[schema.GroupVersionKind]int{}
	for _, o := range b.Params {
		counts[o.GroupVersionKind()]++
	}
	var out []Finding
	seen := map[schema.GroupVersionKind]bool{}
	for _, pk := range b.ParamKinds() {
		gvk := schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		n := counts[gvk]
		var msg string
		switch {
		case opts.ClusterAccess && n > 0:
			msg = fmt.Sprintf("paramKind %s: the bundle carries %d object(s) of it, so its params are the bundle's, never the cluster's (what was reviewed wins); leave them out to read the cluster's", gvk.Kind, n)
		case !opts.ClusterAccess && n == 0:
			msg = fmt.Sprintf("paramKind %s: the bundle carries no object of it, so bindings that use it find no params (their parameterNotFoundAction decides) unless the function reads the cluster (docs/cluster.md; lint --cluster-access)", gvk.Kind)
		default:
			continue
		}
		out = append(out, Finding{Rule: ParamSource, Severity: Warning, Object: "bundle", Field: "", Message: msg})
	}
	return out
}
