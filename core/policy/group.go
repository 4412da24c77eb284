package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Routes: each group is served on prefix + "/" + ID. The bare prefix serves
// the bundle's default group (no selectors, failurePolicy Fail,
// reinvocationPolicy Never), whatever its members: the route of
// configurations rendered before group IDs named their members, and of
// requests sent by hand.
const (
	ValidatePathPrefix = "/validate"
	MutatePathPrefix   = "/mutate"
)

// Type is the kind of webhook a group becomes.
type Type int

const (
	// Validating groups hold ValidatingAdmissionPolicyBindings.
	Validating Type = iota
	// Mutating groups hold MutatingAdmissionPolicyBindings.
	Mutating
)

func (t Type) String() string {
	if t == Mutating {
		return "mutating"
	}
	return "validating"
}

// Prefix is the type's route prefix.
func (t Type) Prefix() string {
	if t == Mutating {
		return MutatePathPrefix
	}
	return ValidatePathPrefix
}

// Route names one group: its type and ID.
type Route struct {
	Type  Type
	Group string
}

// Path is the route's URL path.
func (r Route) Path() string {
	if r.Group == "" {
		return r.Type.Prefix()
	}
	return r.Type.Prefix() + "/" + r.Group
}

// ParseRoute accepts "/validate", "/validate/<id>", "/mutate" and
// "/mutate/<id>".
func ParseRoute(path string) (Route, bool) {
	for _, t := range []Type{Validating, Mutating} {
		if path == t.Prefix() {
			return Route{Type: t}, true
		}
		rest, ok := strings.CutPrefix(path, t.Prefix()+"/")
		if ok && rest != "" && !strings.Contains(rest, "/") {
			return Route{Type: t, Group: rest}, true
		}
	}
	return Route{}, false
}

// Group is a set of bindings that kube-apiserver can pre-filter identically:
// the function cannot read namespace labels, but the apiserver evaluates a
// webhook's namespaceSelector before calling it. Each group becomes one
// webhook with its own route, so a request that reaches a route has already
// passed the group's namespaceSelector.
type Group struct {
	Type Type
	// ID is a digest of what the group's webhook tells kube-apiserver to
	// filter by and of the names of its bindings: the same for the same
	// selectors, failure policy, (mutating) reinvocation policy and
	// bindings, whatever the bindings' and policies' other contents. A
	// publish that changes neither keeps every route; one that moves,
	// adds or removes a binding gives its group a new route, so a webhook
	// configuration rendered before it names a route of its own, which
	// the function serves with the bundle it was rendered from for a
	// transition (docs/cluster.md).
	ID string
	// Default: no selectors, failurePolicy Fail, reinvocationPolicy Never;
	// also served on the bare prefix.
	Default bool
	// NamespaceSelector is the policy's and the binding's selectors merged.
	NamespaceSelector *metav1.LabelSelector
	// ObjectSelector is the policy's and the binding's selectors merged.
	ObjectSelector *metav1.LabelSelector
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	// ReinvocationPolicy of a mutating group's policies: a webhook has one.
	ReinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
	// Bindings of a validating group, in bundle order.
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// MutatingBindings of a mutating group, in bundle order.
	MutatingBindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Rules cover every request any binding of the group can match.
	Rules []admissionregistrationv1.RuleWithOperations
}

// Route is the group's route.
func (g *Group) Route() Route { return Route{Type: g.Type, Group: g.ID} }

// Path is the group's URL path.
func (g *Group) Path() string { return g.Route().Path() }

type groupKey struct {
	NamespaceSelector  *metav1.LabelSelector                          `json:"namespaceSelector"`
	ObjectSelector     *metav1.LabelSelector                          `json:"objectSelector"`
	FailurePolicy      admissionregistrationv1.FailurePolicyType      `json:"failurePolicy"`
	ReinvocationPolicy admissionregistrationv1.ReinvocationPolicyType `json:"reinvocationPolicy,omitempty"`
	// Binding names the one binding of a group of its own: a binding of
	// a MutatingAdmissionPolicy with reinvocationPolicy IfNeeded.
	Binding string `json:"binding,omitempty"`
}

// grouper accumulates bindings into groups of one type, by the digest of
// their key.
type grouper struct {
	typ   Type
	byKey map[string]*Group
	keys  map[*Group]string
	// first is the bundle position of each group's first binding.
	first map[*Group]int
}

func newGrouper(t Type) *grouper {
	return &grouper{typ: t, byKey: map[string]*Group{}, keys: map[*Group]string{}, first: map[*Group]int{}}
}

// add returns the group of a binding (with matchResources binding, possibly
// nil) of a policy (with constraints, failure and reinvocation policies),
// creating it if needed, with the binding's rules added. own names a
// binding that has a group of its own ("" for none).
func (gr *grouper) add(constraints, binding *admissionregistrationv1.MatchResources, fp admissionregistrationv1.FailurePolicyType, rp admissionregistrationv1.ReinvocationPolicyType, own string) *Group {
	var bindingNS, bindingObj *metav1.LabelSelector
	if binding != nil {
		bindingNS, bindingObj = binding.NamespaceSelector, binding.ObjectSelector
	}
	key := groupKey{
		NamespaceSelector:  MergeSelectors(constraints.NamespaceSelector, bindingNS),
		ObjectSelector:     MergeSelectors(constraints.ObjectSelector, bindingObj),
		FailurePolicy:      fp,
		ReinvocationPolicy: rp,
		Binding:            own,
	}
	kid := key.id()
	g, ok := gr.byKey[kid]
	if !ok {
		g = &Group{Type: gr.typ, Default: key.isDefault(), NamespaceSelector: key.NamespaceSelector, ObjectSelector: key.ObjectSelector, FailurePolicy: key.FailurePolicy, ReinvocationPolicy: key.ReinvocationPolicy}
		gr.byKey[kid] = g
		gr.keys[g] = kid
		gr.first[g] = len(gr.first)
	}
	rules := constraints.ResourceRules
	if binding != nil && len(binding.ResourceRules) > 0 {
		// A binding only narrows its policy; either rule set covers the
		// intersection, and the binding's is usually tighter.
		rules = binding.ResourceRules
	}
	for _, r := range rules {
		g.Rules = appendRule(g.Rules, admissionregistrationv1.RuleWithOperations(r.RuleWithOperations))
	}
	return g
}

// groups gives each group its ID, from its key and its bindings' names,
// and returns them: validating groups the default one first, the others
// ordered by ID (kube-apiserver calls them in parallel); mutating groups
// in bundle order, by their first binding (kube-apiserver calls them in
// order, and each sees what the ones before it changed).
func (gr *grouper) groups(names func(*Group) []string) []*Group {
	groups := make([]*Group, 0, len(gr.byKey))
	for _, g := range gr.byKey {
		members := slices.Sorted(slices.Values(names(g)))
		data, _ := json.Marshal(struct {
			Key      string   `json:"key"`
			Bindings []string `json:"bindings"`
		}{gr.keys[g], members}) // strings only: cannot fail
		sum := sha256.Sum256(data)
		g.ID = hex.EncodeToString(sum[:])[:10]
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if gr.typ == Mutating {
			return gr.first[groups[i]] < gr.first[groups[j]]
		}
		if groups[i].Default != groups[j].Default {
			return groups[i].Default
		}
		return groups[i].ID < groups[j].ID
	})
	return groups
}

// Groups partitions the bundle's ValidatingAdmissionPolicyBindings. The
// default group, if any, comes first; the others are ordered by ID.
func (b *Set) Groups() []*Group {
	gr := newGrouper(Validating)
	for _, binding := range b.Bindings {
		p := b.Policy(binding.Spec.PolicyName)
		if p == nil {
			continue
		}
		g := gr.add(p.Spec.MatchConstraints, binding.Spec.MatchResources, *p.Spec.FailurePolicy, "", "")
		g.Bindings = append(g.Bindings, binding)
	}
	return gr.groups(func(g *Group) []string {
		names := make([]string, len(g.Bindings))
		for i, b := range g.Bindings {
			names[i] = b.Name
		}
		return names
	})
}

// MutatingGroups partitions the bundle's MutatingAdmissionPolicyBindings the
// same way, also by the policy's reinvocationPolicy, which a mutating
// webhook carries once; each binding of a policy with reinvocationPolicy
// IfNeeded is a group of its own. kube-apiserver reinvokes an IfNeeded
// webhook when a later webhook changed the object, as it reinvokes an
// IfNeeded policy that a later policy changed the object after; in one
// webhook, a policy's change after another's would not reinvoke it.
func (b *Set) MutatingGroups() []*Group {
	gr := newGrouper(Mutating)
	for _, binding := range b.MutatingBindings {
		p := b.MutatingPolicy(binding.Spec.PolicyName)
		if p == nil {
			continue
		}
		own := ""
		if p.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			own = binding.Name
		}
		g := gr.add(p.Spec.MatchConstraints, binding.Spec.MatchResources, *p.Spec.FailurePolicy, p.Spec.ReinvocationPolicy, own)
		g.MutatingBindings = append(g.MutatingBindings, binding)
	}
	return gr.groups(func(g *Group) []string {
		names := make([]string, len(g.MutatingBindings))
		for i, b := range g.MutatingBindings {
			names[i] = b.Name
		}
		return names
	})
}

func (k groupKey) isDefault() bool {
	return isEmpty(k.NamespaceSelector) && isEmpty(k.ObjectSelector) && k.FailurePolicy == admissionregistrationv1.Fail &&
		(k.ReinvocationPolicy == "" || k.ReinvocationPolicy == admissionregistrationv1.NeverReinvocationPolicy)
}

func (k groupKey) id() string {
	data, _ := json.Marshal(k) // plain structs and sorted maps: cannot fail, and deterministic
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func isEmpty(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

func appendRule(rules []admissionregistrationv1.RuleWithOperations, r admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	for _, existing := range rules {
		if reflect.DeepEqual(existing, r) {
			return rules
		}
	}
	return append(rules, r)
}

// MergeSelectors returns a selector that matches exactly what both a and b
// match, in a canonical form (sorted, de-duplicated) so equal selectors
// produce equal group IDs. A label pinned to different values by the two
// becomes two In requirements, which nothing satisfies, as intended.
func MergeSelectors(a, b *metav1.LabelSelector) *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	var exprs []metav1.LabelSelectorRequirement
	for _, s := range []*metav1.LabelSelector{a, b} {
		if s == nil {
			continue
		}
		for k, v := range s.MatchLabels {
			if existing, ok := out.MatchLabels[k]; ok && existing != v {
				exprs = append(exprs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
				continue
			}
			if out.MatchLabels == nil {
				out.MatchLabels = map[string]string{}
			}
			out.MatchLabels[k] = v
		}
		for _, e := range s.MatchExpressions {
			e = *e.DeepCopy()
			sort.Strings(e.Values)
			exprs = append(exprs, e)
		}
	}
	sort.Slice(exprs, func(i, j int) bool {
		x, _ := json.Marshal(exprs[i])
		y, _ := json.Marshal(exprs[j])
		return string(x) < string(y)
	})
	for _, e := range exprs {
		if n := len(out.MatchExpressions); n > 0 && reflect.DeepEqual(out.MatchExpressions[n-1], e) {
			continue
		}
		out.MatchExpressions = append(out.MatchExpressions, e)
	}
	return out
}
