package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValidatePathPrefix is the route of the validating webhook; a group with an
// ID is served on ValidatePathPrefix + "/" + ID.
const ValidatePathPrefix = "/validate"

// Group is a set of bindings that kube-apiserver can pre-filter identically:
// the function cannot read namespace labels, but the apiserver evaluates a
// webhook's namespaceSelector before calling it. Each group becomes one
// webhook with its own route, so a request that reaches a route has already
// passed the group's namespaceSelector.
type Group struct {
	// ID is stable for the same selectors and failure policy; empty for the
	// default group (no selectors, failurePolicy Fail), served on /validate.
	ID string
	// NamespaceSelector is the policy's and the binding's selectors merged.
	NamespaceSelector *metav1.LabelSelector
	// ObjectSelector is the policy's and the binding's selectors merged.
	ObjectSelector *metav1.LabelSelector
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	// Bindings in bundle order.
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// Rules cover every request any binding of the group can match.
	Rules []admissionregistrationv1.RuleWithOperations
}

// Path is the group's route.
func (g *Group) Path() string {
	if g.ID == "" {
		return ValidatePathPrefix
	}
	return ValidatePathPrefix + "/" + g.ID
}

type groupKey struct {
	NamespaceSelector *metav1.LabelSelector                     `json:"namespaceSelector"`
	ObjectSelector    *metav1.LabelSelector                     `json:"objectSelector"`
	FailurePolicy     admissionregistrationv1.FailurePolicyType `json:"failurePolicy"`
}

// Groups partitions the bundle's bindings. The default group, if any, comes
// first; the others are ordered by ID.
func (b *Bundle) Groups() []*Group {
	byID := map[string]*Group{}
	for _, binding := range b.Bindings {
		p := b.Policy(binding.Spec.PolicyName)
		if p == nil {
			continue
		}
		key := groupKey{
			NamespaceSelector: MergeSelectors(p.Spec.MatchConstraints.NamespaceSelector, bindingSelector(binding, true)),
			ObjectSelector:    MergeSelectors(p.Spec.MatchConstraints.ObjectSelector, bindingSelector(binding, false)),
			FailurePolicy:     *p.Spec.FailurePolicy,
		}
		id := key.id()
		g, ok := byID[id]
		if !ok {
			g = &Group{ID: id, NamespaceSelector: key.NamespaceSelector, ObjectSelector: key.ObjectSelector, FailurePolicy: key.FailurePolicy}
			byID[id] = g
		}
		g.Bindings = append(g.Bindings, binding)
		rules := p.Spec.MatchConstraints.ResourceRules
		if mr := binding.Spec.MatchResources; mr != nil && len(mr.ResourceRules) > 0 {
			// A binding only narrows its policy; either rule set covers the
			// intersection, and the binding's is usually tighter.
			rules = mr.ResourceRules
		}
		for _, r := range rules {
			g.Rules = appendRule(g.Rules, admissionregistrationv1.RuleWithOperations(r.RuleWithOperations))
		}
	}
	groups := make([]*Group, 0, len(byID))
	for _, g := range byID {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
	return groups
}

func bindingSelector(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, namespace bool) *metav1.LabelSelector {
	if b.Spec.MatchResources == nil {
		return nil
	}
	if namespace {
		return b.Spec.MatchResources.NamespaceSelector
	}
	return b.Spec.MatchResources.ObjectSelector
}

func (k groupKey) id() string {
	if isEmpty(k.NamespaceSelector) && isEmpty(k.ObjectSelector) && k.FailurePolicy == admissionregistrationv1.Fail {
		return ""
	}
	data, _ := json.Marshal(k) // plain structs and sorted maps: cannot fail, and deterministic
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
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
