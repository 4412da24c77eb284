package engine

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
)

// index narrows a route's hooks to those whose policy can match a request,
// so that a review never scans every policy of a large bundle: upstream's
// dispatcher runs its matcher (selectors, then resource rules) on every hook
// it is given. A policy is a candidate for a request when one of its
// matchConstraints.resourceRules matches the request's group, version,
// resource, subresource, operation and scope, as upstream's rule matcher
// decides; the dispatcher then matches candidates in full (names, excluded
// rules, selectors, bindings), so the answer is the one it would give over
// all hooks. A policy without resource rules matches everything upstream and
// is always a candidate. Equivalent resources (matchPolicy: Equivalent) need
// the cluster's resource mapping, which the function does not have: upstream
// matches them by the same rules only, as here.
//
// Candidate lists are computed on first use per (resource, operation, scope)
// and kept: a cluster has a bounded set of those.
type index[H any] struct {
	hooks []H
	// rules[i] are hooks[i]'s resource rules; nil matches every request.
	rules [][]admissionregistrationv1.NamedRuleWithOperations

	mu    sync.RWMutex
	cache map[indexKey][]H
}

// maxIndexKeys bounds the cache; past it lists are computed per request.
const maxIndexKeys = 4096

// indexKey is everything of a request upstream's rule matcher looks at.
type indexKey struct {
	group, version, resource, subresource string
	operation                             admission.Operation
	namespaced                            bool
}

func newIndex[H any](hooks []H, constraints func(H) *admissionregistrationv1.MatchResources) *index[H] {
	x := &index[H]{hooks: hooks, rules: make([][]admissionregistrationv1.NamedRuleWithOperations, len(hooks)), cache: map[indexKey][]H{}}
	for i, h := range hooks {
		if m := constraints(h); m != nil {
			x.rules[i] = m.ResourceRules
		}
	}
	return x
}

// candidates are the hooks that may match a, in route order.
func (x *index[H]) candidates(a admission.Attributes) []H {
	gvr := a.GetResource()
	k := indexKey{
		group: gvr.Group, version: gvr.Version, resource: gvr.Resource, subresource: a.GetSubresource(),
		operation: a.GetOperation(), namespaced: a.GetNamespace() != "",
	}
	x.mu.RLock()
	c, ok := x.cache[k]
	x.mu.RUnlock()
	if ok {
		return c
	}
	c = x.match(a)
	x.mu.Lock()
	if len(x.cache) < maxIndexKeys {
		x.cache[k] = c
	}
	x.mu.Unlock()
	return c
}

func (x *index[H]) match(a admission.Attributes) []H {
	out := []H{}
	for i, h := range x.hooks {
		if len(x.rules[i]) == 0 {
			out = append(out, h)
			continue
		}
		for _, r := range x.rules[i] {
			m := rules.Matcher{Rule: r.RuleWithOperations, Attr: a}
			if m.Matches() {
				out = append(out, h)
				break
			}
		}
	}
	return out
}
