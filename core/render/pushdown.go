package render

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	clientscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy"
)

// Push-down: a webhook's matchConditions that kube-apiserver evaluates
// before calling the function, true whenever at least one binding of the
// webhook's group could act on the request.
//
// One condition, an OR of a term per binding. A term is
//
//	(D && C) || (A && !D)
//
// D: the request matches the binding's and its policy's rules directly and
// no exclude rule through any equivalent resource could hold (so the
// binding matches in-cluster); A: it could match through an equivalent
// resource (same resource name in another group or version: Kubernetes
// registers equivalents that way) and no exclude rule matches it directly
// (so a binding that matches in-cluster has A); C: the policy's own
// matchConditions that can be pushed (PushedCondition). Rule checks read
// only what every request has, guarded with has(), and cannot fail.
//
// Errors. Under failurePolicy Ignore a failing term makes the condition
// fail only when no term is true; kube-apiserver then skips the call, and
// the function would have skipped every binding too (a failing
// matchCondition under Ignore skips its policy). Under Fail kube-apiserver
// would reject the request itself, in its own words and quoting the
// condition, where the function denies in upstream's: so under Fail no
// pushed condition can fail. Each is pushed as written when it cannot, as
// G || (c) when a guard G covers every way it could (celeval.GuardCondition: then
// kube-apiserver calls the function, which answers as upstream does), and
// not at all otherwise. A binding that takes params keeps its conditions
// under Fail: kube-apiserver denies one whose params are missing before it
// evaluates them. Rule checks cannot fail.
//
// Cost. Upstream evaluates a webhook's conditions with a per-call limit
// and a budget; the condition is pushed only with a bound on its cost
// within the per-call limit on every request kube-apiserver accepts,
// dropping the costliest binding's conditions until one holds.

// PushDownName names the condition render adds.
const PushDownName = "admitfn.io/could-act"

// Report is what push-down did for one webhook.
type Report struct {
	Webhook string
	// Conditions are the matchConditions added.
	Conditions []admissionregistrationv1.MatchCondition
	// Bindings, in the group's order.
	Bindings []BindingReport
}

// BindingReport is what was pushed for one binding, and what was not.
type BindingReport struct {
	Binding, Policy string
	// Pushed names what its term checks beyond the webhook's rules and
	// selectors: "matchCondition <name>", "resourceNames", ….
	Pushed []string
	// Guarded are matchConditions pushed with a guard (under
	// failurePolicy Fail, where one could fail to evaluate).
	Guarded []Guard
	// Kept are what the function alone checks, and why.
	Kept []Kept
}

// Kept is one thing left to the function.
type Kept struct{ What, Why string }

// Guard is a condition pushed with a guard: kube-apiserver evaluates
// When || (condition), so that where the condition could fail to evaluate
// it calls the function, which answers as upstream does.
type Guard struct{ What, When string }

// record notes the matchCondition name as pushed, as written or with
// guard.
func (br *BindingReport) record(name, guard string) {
	if guard == "false" {
		br.Pushed = append(br.Pushed, "matchCondition "+name)
		return
	}
	br.Guarded = append(br.Guarded, Guard{"matchCondition " + name, guard})
}

// binding is what push-down needs of one binding of either type.
type binding struct {
	name, policy           string
	policyRules, bindRules *admissionregistrationv1.MatchResources
	conditions             []admissionregistrationv1.MatchCondition
	// takesParams: the binding has a paramRef, or its policy a paramKind
	// (kube-apiserver fails a binding without params before its
	// conditions).
	takesParams bool
	// object is what is known of the kind of object its requests carry.
	object celeval.GuardOptions
}

// bindingsOf returns the group's bindings with their policies.
func bindingsOf(g *policy.Group, set *policy.Set) []binding {
	var out []binding
	for _, b := range g.Bindings {
		p := set.Policy(b.Spec.PolicyName)
		if p == nil {
			continue
		}
		out = append(out, binding{
			name: b.Name, policy: p.Name, policyRules: p.Spec.MatchConstraints, bindRules: b.Spec.MatchResources,
			conditions: p.Spec.MatchConditions, takesParams: b.Spec.ParamRef != nil || p.Spec.ParamKind != nil,
			object: objectOf(p.Spec.MatchConstraints, b.Spec.MatchResources),
		})
	}
	for _, b := range g.MutatingBindings {
		p := set.MutatingPolicy(b.Spec.PolicyName)
		if p == nil {
			continue
		}
		out = append(out, binding{
			name: b.Name, policy: p.Name, policyRules: p.Spec.MatchConstraints, bindRules: b.Spec.MatchResources,
			conditions: p.Spec.MatchConditions, takesParams: b.Spec.ParamRef != nil || p.Spec.ParamKind != nil,
			object: objectOf(p.Spec.MatchConstraints, b.Spec.MatchResources),
		})
	}
	return out
}

// candidate is a binding's pushable conditions and their bound.
type candidate struct {
	conds []admissionregistrationv1.MatchCondition
	// guards of conds: "false" for a condition pushed as written.
	guards []string
	// costs bound each of conds (unboundedCost: no bound).
	costs []uint64
	// resource: the indexes of conds that read request.resource.
	resource []int
	cost     uint64
}

// PushDown computes the push-down of group g of set, for a webhook named
// webhookName. clusterAccess: the function reads the authorizer from the
// cluster it serves (render --cluster), so conditions that ask it may be
// pushed.
//
// A group of one binding whose rules the webhook's already are gets the
// policy's pushable conditions as they are, each its own matchCondition in
// the policy's order: kube-apiserver evaluates them with the limits and
// budget it gives the policy's. Any other group gets one condition, the OR
// of its bindings' terms, with a cost bound.
func PushDown(g *policy.Group, set *policy.Set, webhookName string, clusterAccess bool) Report {
	rep := Report{Webhook: webhookName}
	bindings := bindingsOf(g, set)
	verbatim := false
	if len(bindings) == 1 {
		d, a, _, _ := ruleTerms(g, bindings[0])
		verbatim = d == "true" && a == "true"
	}
	denyOnError := g.FailurePolicy != admissionregistrationv1.Ignore
	cands := make([]candidate, len(bindings))
	for i, b := range bindings {
		br := BindingReport{Binding: b.name, Policy: b.policy}
		var cand candidate
		for _, c := range b.conditions {
			what := "matchCondition " + c.Name
			if denyOnError && b.takesParams {
				br.Kept = append(br.Kept, Kept{what, "under failurePolicy Fail: the binding takes params, and kube-apiserver denies a binding whose params are missing before it evaluates its conditions"})
				continue
			}
			expr, g1 := c.Expression, "false"
			why, reads, cost := pushable1(expr, clusterAccess)
			if why == "" && denyOnError {
				gd, err := celeval.GuardCondition(c.Expression, b.object)
				switch {
				case celeval.IsUnbounded(err):
					cost = unboundedCost
				case celeval.IsUnguardable(err):
					why = "under failurePolicy Fail it could fail to evaluate, which kube-apiserver would answer in its own words: it " + err.Error()
				case err != nil:
					why = "kube-apiserver would refuse it guarded: " + err.Error()
				default:
					expr, g1, cost = gd.Expr, gd.Guard, gd.Cost
				}
			}
			if why == "" && verbatim && reads.RequestResource && !everyGroupVersion(g.Rules) {
				why = "reads request.resource, which a webhook's conditions see as requested and the policy as its rules matched it (an equivalent resource)"
			}
			switch {
			case why != "" || cost != unboundedCost:
			case !verbatim:
				why = "its cost has no bound within kube-apiserver's per-call limit on every request, and it would share one with the other bindings' conditions"
			case denyOnError:
				why = "under failurePolicy Fail: its cost has no bound within kube-apiserver's per-call limit on every request, and past it kube-apiserver would reject the request in its own words"
			}
			if why != "" {
				br.Kept = append(br.Kept, Kept{what, why})
				continue
			}
			if reads.RequestResource {
				cand.resource = append(cand.resource, len(cand.conds))
			}
			cand.conds = append(cand.conds, admissionregistrationv1.MatchCondition{Name: c.Name, Expression: expr})
			cand.guards = append(cand.guards, g1)
			cand.costs = append(cand.costs, cost)
			cand.cost += cost
		}
		cands[i] = cand
		rep.Bindings = append(rep.Bindings, br)
	}
	if verbatim {
		if denyOnError {
			withinBudget(&cands[0], &rep.Bindings[0])
		}
		for j, c := range cands[0].conds {
			rep.Conditions = append(rep.Conditions, admissionregistrationv1.MatchCondition{Name: c.Name, Expression: c.Expression})
			rep.Bindings[0].record(c.Name, cands[0].guards[j])
		}
		fill(&rep)
		return rep
	}
	// Drop the costliest binding's conditions until the whole is bounded.
	for {
		expr, pushed := condition(g, bindings, cands)
		if expr == "true" {
			fill(&rep)
			return rep
		}
		err := checkCombined(g, bindings, cands, expr)
		if err == nil {
			rep.Conditions = []admissionregistrationv1.MatchCondition{{Name: PushDownName, Expression: expr}}
			for i := range rep.Bindings {
				rep.Bindings[i].Pushed = pushed[i]
				for j, c := range cands[i].conds {
					rep.Bindings[i].record(c.Name, cands[i].guards[j])
				}
			}
			fill(&rep)
			return rep
		}
		if worst := costliest(cands); worst >= 0 {
			why := "with the other bindings' conditions, no cost bound within kube-apiserver's per-call limit"
			if !celeval.IsUnbounded(err) {
				why = "kube-apiserver would refuse the combined condition: " + err.Error()
			}
			for _, c := range cands[worst].conds {
				rep.Bindings[worst].Kept = append(rep.Bindings[worst].Kept, Kept{"matchCondition " + c.Name, why})
			}
			cands[worst] = candidate{}
			continue
		}
		// Rule checks alone failed: a bug, never a reason to call less.
		for i := range rep.Bindings {
			rep.Bindings[i].Kept = append(rep.Bindings[i].Kept, Kept{"everything", "the rule checks did not compile: " + err.Error()})
		}
		return rep
	}
}

const unboundedCost = ^uint64(0)

// costPlaceholder stands for a condition in the skeleton checkCombined
// bounds: it cannot fold away, and costs next to nothing.
const costPlaceholder = `request.operation != ""`

// checkCombined checks the group's combined condition expr as kube-apiserver
// would, and bounds its cost by the rule checks' (the condition with each
// policy condition a placeholder) plus each condition's own bound: a
// guarded condition's bound holds only evaluated left to right, as
// kube-apiserver does, which a bound of the whole would not know.
func checkCombined(g *policy.Group, bindings []binding, cands []candidate, expr string) error {
	if err := celeval.CompileWebhookCondition(expr); err != nil {
		return err
	}
	skeleton := make([]candidate, len(cands))
	total := uint64(0)
	for i, c := range cands {
		skeleton[i] = c
		skeleton[i].conds = nil
		for _, mc := range c.conds {
			skeleton[i].conds = append(skeleton[i].conds, admissionregistrationv1.MatchCondition{Name: mc.Name, Expression: costPlaceholder})
		}
		total += c.cost
	}
	skel, _ := condition(g, bindings, skeleton)
	rules, err := celeval.CheckWebhookCondition(skel)
	if err != nil {
		return err
	}
	if rules+total > celconfig.PerCallLimit {
		return celeval.ErrUnbounded
	}
	return nil
}

// objectOf is the kind of object a binding's requests carry, when its
// rules (the binding's, else its policy's) name resources of exactly one
// built-in kind and no subresource or wildcard.
func objectOf(policyRules, bindRules *admissionregistrationv1.MatchResources) celeval.GuardOptions {
	rules := policyRules
	if bindRules != nil && len(bindRules.ResourceRules) > 0 {
		rules = bindRules
	}
	if rules == nil {
		return celeval.GuardOptions{}
	}
	var found celeval.GuardOptions
	for _, r := range rules.ResourceRules {
		for _, group := range r.APIGroups {
			for _, version := range r.APIVersions {
				for _, res := range r.Resources {
					kind, t, ok := builtinKind(schema.GroupVersionResource{Group: group, Version: version, Resource: res})
					if !ok || (found.Type != nil && found.Kind != kind) {
						return celeval.GuardOptions{}
					}
					found = celeval.GuardOptions{Kind: kind, Type: t}
				}
			}
		}
	}
	return found
}

// builtinKinds are client-go's kinds by the resource that serves them.
var builtinKinds = sync.OnceValue(func() map[schema.GroupVersionResource]schema.GroupVersionKind {
	out := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	for gvk := range clientscheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		out[plural] = gvk
	}
	return out
})

func builtinKind(gvr schema.GroupVersionResource) (schema.GroupVersionKind, reflect.Type, bool) {
	if strings.ContainsAny(gvr.Group+gvr.Version+gvr.Resource, "*/") {
		return schema.GroupVersionKind{}, nil, false
	}
	gvk, ok := builtinKinds()[gvr]
	if !ok {
		return schema.GroupVersionKind{}, nil, false
	}
	t, ok := clientscheme.Scheme.AllKnownTypes()[gvk]
	return gvk, t, ok
}

// withinBudget drops the costliest of a group of one binding's conditions
// until together they fit the budget kube-apiserver gives a webhook's
// conditions, the one it gives a policy's: past it they would fail.
func withinBudget(cand *candidate, br *BindingReport) {
	for cand.cost > celconfig.RuntimeCELCostBudgetMatchConditions {
		worst := 0
		for j, c := range cand.costs {
			if c > cand.costs[worst] {
				worst = j
			}
		}
		br.Kept = append(br.Kept, Kept{"matchCondition " + cand.conds[worst].Name,
			"under failurePolicy Fail: with the others, its cost could exceed kube-apiserver's budget for a webhook's conditions, which would reject the request in its own words"})
		cand.cost -= cand.costs[worst]
		cand.conds = slices.Delete(cand.conds, worst, worst+1)
		cand.guards = slices.Delete(cand.guards, worst, worst+1)
		cand.costs = slices.Delete(cand.costs, worst, worst+1)
		for k, r := range cand.resource {
			if r == worst {
				cand.resource = slices.Delete(cand.resource, k, k+1)
				break
			}
		}
		for k := range cand.resource {
			if cand.resource[k] > worst {
				cand.resource[k]--
			}
		}
	}
}

// pushable1 says why a policy's matchCondition cannot be pushed ("" if it
// can), what it reads, and bounds its cost (unboundedCost: no bound).
func pushable1(expr string, clusterAccess bool) (string, celeval.Reads, uint64) {
	reads, err := celeval.ExpressionReads(expr)
	if err != nil {
		return "does not parse: " + err.Error(), reads, 0
	}
	for _, v := range reads.Variables {
		switch v {
		case plugincel.ParamsVarName:
			return "reads params, which kube-apiserver does not give a webhook's conditions", reads, 0
		case plugincel.NamespaceVarName:
			return "reads namespaceObject, which kube-apiserver does not give a webhook's conditions", reads, 0
		case plugincel.VariableVarName:
			return "reads variables, which a webhook's conditions do not have", reads, 0
		case plugincel.AuthorizerVarName, plugincel.RequestResourceAuthorizerVarName:
			if !clusterAccess {
				return "reads authorizer, which the function answers only with cluster access (render --cluster)", reads, 0
			}
		}
	}
	cost, err := celeval.CheckWebhookCondition(expr)
	switch {
	case celeval.IsUnbounded(err):
		return "", reads, unboundedCost
	case err != nil:
		return "kube-apiserver would refuse it as a webhook condition: " + err.Error(), reads, 0
	}
	return "", reads, cost
}

// everyGroupVersion: each rule matches every group and version, so a
// request the webhook matches it matches as requested.
func everyGroupVersion(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, "*") || !slices.Contains(r.APIVersions, "*") {
			return false
		}
	}
	return true
}

// costliest is the index of the candidate with the highest bound, -1 if
// none has conditions.
func costliest(cands []candidate) int {
	worst := -1
	for i, c := range cands {
		if len(c.conds) > 0 && (worst < 0 || c.cost > cands[worst].cost) {
			worst = i
		}
	}
	return worst
}

// fill says, for a binding with nothing pushed or kept, why.
func fill(rep *Report) {
	for i := range rep.Bindings {
		if len(rep.Conditions) == 0 {
			rep.Bindings[i].Pushed = nil
		}
		if len(rep.Conditions) == 0 {
			rep.Bindings[i].Guarded = nil
		}
		if len(rep.Bindings[i].Kept) == 0 && len(rep.Bindings[i].Pushed) == 0 && len(rep.Bindings[i].Guarded) == 0 {
			rep.Bindings[i].Kept = []Kept{{"nothing", "the webhook's rules and selectors already send only what it could act on"}}
		}
	}
}

// condition is the OR of the bindings' terms, and what each term checks.
func condition(g *policy.Group, bindings []binding, cands []candidate) (string, [][]string) {
	terms := make([]string, len(bindings))
	pushed := make([][]string, len(bindings))
	contributionOnly := true
	for i, b := range bindings {
		direct, any, what, contribution := ruleTerms(g, b)
		var conds []string
		for j, c := range cands[i].conds {
			conds = append(conds, embed(c.Expression))
			if slices.Contains(cands[i].resource, j) {
				// request.resource is what the function sees only
				// when the webhook's rules match the request directly.
				direct = and(direct, groupRulesExpr(g))
			}
		}
		contributionOnly = contributionOnly && contribution && len(conds) == 0
		c := and(conds...)
		switch {
		case c == "true":
			terms[i] = any // D implies A
		case any == direct:
			terms[i] = and(direct, c)
		default:
			terms[i] = or(and(direct, c), and(any, not(direct)))
		}
		pushed[i] = what
	}
	if contributionOnly {
		// Every term is the rules its binding adds to the webhook's:
		// together, the webhook's rules.
		return "true", pushed
	}
	return or(terms...), pushed
}

func groupRulesExpr(g *policy.Group) string {
	named := make([]admissionregistrationv1.NamedRuleWithOperations, len(g.Rules))
	for i, r := range g.Rules {
		named[i] = admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: r}
	}
	return rulesExpr(named, true)
}

// ruleTerms are D and A of a binding (see above), what they check beyond
// the webhook's rules, and whether that is only the rules the binding adds
// to the webhook's (its own, or its policy's when it has none).
func ruleTerms(g *policy.Group, b binding) (direct, any string, what []string, contributionOnly bool) {
	var dParts, aParts []string
	contributionOnly = true
	contribution := b.policyRules
	if b.bindRules != nil && len(b.bindRules.ResourceRules) > 0 {
		contribution = b.bindRules
	}
	for _, mr := range []*admissionregistrationv1.MatchResources{b.policyRules, b.bindRules} {
		if mr == nil {
			continue
		}
		exact := mr.MatchPolicy != nil && *mr.MatchPolicy == admissionregistrationv1.Exact
		switch {
		case len(mr.ResourceRules) == 0:
		case mr != contribution && covers(mr.ResourceRules, contribution.ResourceRules):
			// The policy's rules hold every rule of its binding.
		case exact || hasNames(mr.ResourceRules) || !sameRules(mr.ResourceRules, g.Rules):
			dParts = append(dParts, rulesExpr(mr.ResourceRules, true))
			aParts = append(aParts, rulesExpr(mr.ResourceRules, exact))
			what = append(what, "resource rules")
			if hasNames(mr.ResourceRules) {
				what = append(what, "resourceNames")
				contributionOnly = false
			}
			if exact {
				// The webhook matches equivalents; an Exact policy
				// does not.
				what = append(what, "matchPolicy Exact")
				contributionOnly = false
			}
			if mr != contribution {
				contributionOnly = false
			}
		}
		if len(mr.ExcludeResourceRules) > 0 {
			// D needs every possible exclusion ruled out, A only the
			// direct one.
			dParts = append(dParts, not(rulesExpr(mr.ExcludeResourceRules, exact)))
			aParts = append(aParts, not(rulesExpr(mr.ExcludeResourceRules, true)))
			what = append(what, "excludeResourceRules")
			contributionOnly = false
		}
	}
	return and(dParts...), and(aParts...), dedup(what), contributionOnly
}

// covers: every rule of inner is within one rule of outer (operations,
// groups, versions, resources, scope and names), so matching inner implies
// matching outer.
func covers(outer, inner []admissionregistrationv1.NamedRuleWithOperations) bool {
	for _, in := range inner {
		if !slices.ContainsFunc(outer, func(out admissionregistrationv1.NamedRuleWithOperations) bool { return ruleCovers(out, in) }) {
			return false
		}
	}
	return true
}

func ruleCovers(out, in admissionregistrationv1.NamedRuleWithOperations) bool {
	within := func(o, i []string) bool {
		if slices.Contains(o, "*") {
			return true
		}
		for _, x := range i {
			if !slices.Contains(o, x) {
				return false
			}
		}
		return true
	}
	scope := func(s *admissionregistrationv1.ScopeType) admissionregistrationv1.ScopeType {
		if s == nil {
			return admissionregistrationv1.AllScopes
		}
		return *s
	}
	if !within(opStrings(out.Operations), opStrings(in.Operations)) || !within(out.APIGroups, in.APIGroups) ||
		!within(out.APIVersions, in.APIVersions) {
		return false
	}
	if scope(out.Scope) != admissionregistrationv1.AllScopes && scope(out.Scope) != scope(in.Scope) {
		return false
	}
	if len(out.ResourceNames) > 0 && (len(in.ResourceNames) == 0 || !within(out.ResourceNames, in.ResourceNames)) {
		return false
	}
	for _, r := range in.Resources {
		name, sub, _ := strings.Cut(r, "/")
		if !slices.ContainsFunc(out.Resources, func(o string) bool {
			oName, oSub, _ := strings.Cut(o, "/")
			return (oName == "*" || oName == name) && (oSub == "*" || oSub == sub)
		}) {
			return false
		}
	}
	return true
}

func dedup(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// ruleWhat names what rules check that a webhook's union of rules cannot.
func ruleWhat(rules []admissionregistrationv1.NamedRuleWithOperations) []string {
	what := []string{"resource rules"}
	if hasNames(rules) {
		what = append(what, "resourceNames")
	}
	return what
}

func hasNames(rules []admissionregistrationv1.NamedRuleWithOperations) bool {
	for _, r := range rules {
		if len(r.ResourceNames) > 0 {
			return true
		}
	}
	return false
}

// sameRules: rules, without names, are the group's rules, as a set.
func sameRules(rules []admissionregistrationv1.NamedRuleWithOperations, group []admissionregistrationv1.RuleWithOperations) bool {
	var plain []admissionregistrationv1.RuleWithOperations
	for _, r := range rules {
		plain = appendUnique(plain, admissionregistrationv1.RuleWithOperations(r.RuleWithOperations))
	}
	if len(plain) != len(group) {
		return false
	}
	for _, r := range plain {
		if !slices.ContainsFunc(group, func(o admissionregistrationv1.RuleWithOperations) bool { return equalRule(r, o) }) {
			return false
		}
	}
	return true
}

func appendUnique(rules []admissionregistrationv1.RuleWithOperations, r admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	if slices.ContainsFunc(rules, func(o admissionregistrationv1.RuleWithOperations) bool { return equalRule(r, o) }) {
		return rules
	}
	return append(rules, r)
}

func equalRule(a, b admissionregistrationv1.RuleWithOperations) bool {
	scope := func(s *admissionregistrationv1.ScopeType) admissionregistrationv1.ScopeType {
		if s == nil {
			return admissionregistrationv1.AllScopes
		}
		return *s
	}
	return slices.Equal(a.Operations, b.Operations) && slices.Equal(a.APIGroups, b.APIGroups) &&
		slices.Equal(a.APIVersions, b.APIVersions) && slices.Equal(a.Resources, b.Resources) && scope(a.Scope) == scope(b.Scope)
}

// The request's optional fields (subResource, namespace, name) are absent
// from the request CEL reads when empty, so read through has().
const namespaceRes = `(request.resource.group == "" && request.resource.version == "v1" && request.resource.resource == "namespaces")`

func subresourceIs(sub string) string {
	if sub == "" {
		return "!has(request.subResource)"
	}
	return "(has(request.subResource) && request.subResource == " + quote(sub) + ")"
}

// rulesExpr is true when the request matches one of rules as upstream's
// rule matcher (k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules)
// and resource names decide; with exact false, by resource name alone
// (any group and version).
func rulesExpr(rules []admissionregistrationv1.NamedRuleWithOperations, exact bool) string {
	var terms []string
	for _, r := range rules {
		parts := []string{
			inList("request.operation", opStrings(r.Operations)),
		}
		if exact {
			parts = append(parts, inList("request.resource.group", r.APIGroups), inList("request.resource.version", r.APIVersions))
		}
		parts = append(parts, resourcesExpr(r.Resources), scopeExpr(r.Scope))
		if len(r.ResourceNames) > 0 {
			parts = append(parts, "has(request.name)", inList("request.name", r.ResourceNames))
		}
		terms = append(terms, and(parts...))
	}
	return or(terms...)
}

func opStrings(ops []admissionregistrationv1.OperationType) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

// inList: field is one of values; true when values hold "*".
func inList(field string, values []string) string {
	if slices.Contains(values, "*") {
		return "true"
	}
	if len(values) == 0 {
		return "false"
	}
	if len(values) == 1 {
		return field + " == " + quote(values[0])
	}
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = quote(v)
	}
	return field + " in [" + strings.Join(q, ", ") + "]"
}

func resourcesExpr(resources []string) string {
	var terms []string
	for _, res := range resources {
		name, sub, _ := strings.Cut(res, "/")
		var parts []string
		if name != "*" {
			parts = append(parts, "request.resource.resource == "+quote(name))
		}
		if sub != "*" {
			parts = append(parts, subresourceIs(sub))
		}
		terms = append(terms, and(parts...))
	}
	return or(terms...)
}

func scopeExpr(s *admissionregistrationv1.ScopeType) string {
	if s == nil {
		return "true"
	}
	switch *s {
	case admissionregistrationv1.NamespacedScope:
		return and("has(request.namespace)", not(namespaceRes))
	case admissionregistrationv1.ClusterScope:
		return or("!has(request.namespace)", namespaceRes)
	}
	return "true"
}

func quote(s string) string { return strconv.Quote(s) }

// and, or, not and embed build expressions as text (celeval).
func and(parts ...string) string { return celeval.And(parts...) }

func or(parts ...string) string { return celeval.Or(parts...) }

func not(p string) string { return celeval.Not(p) }

func embed(expr string) string { return celeval.Embed(expr) }

// String is the report as render prints it.
func (r Report) String() string {
	var b strings.Builder
	switch len(r.Conditions) {
	case 0:
		fmt.Fprintf(&b, "%s: nothing pushed down\n", r.Webhook)
	case 1:
		fmt.Fprintf(&b, "%s: 1 matchCondition\n", r.Webhook)
	default:
		fmt.Fprintf(&b, "%s: %d matchConditions\n", r.Webhook, len(r.Conditions))
	}
	for _, br := range r.Bindings {
		fmt.Fprintf(&b, "  binding %s (policy %s)\n", br.Binding, br.Policy)
		for _, p := range br.Pushed {
			if strings.HasPrefix(p, "matchCondition ") {
				fmt.Fprintf(&b, "    pushed as written: %s\n", p)
				continue
			}
			fmt.Fprintf(&b, "    pushed: %s\n", p)
		}
		for _, g := range br.Guarded {
			fmt.Fprintf(&b, "    pushed guarded: %s: the function is called where it could fail to evaluate: %s\n", g.What, g.When)
		}
		for _, k := range br.Kept {
			fmt.Fprintf(&b, "    not pushed: %s: %s\n", k.What, k.Why)
		}
	}
	return b.String()
}
