package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/cluster"
)

// testCluster is what a test file says the cluster holds, for policies
// that read it as a function with cluster access does: whole namespaces
// (namespaceObject, and their labels for namespaceSelectors), the
// authorizer's answers, and the param objects the bundle does not carry.
type testCluster struct {
	Namespaces []corev1.Namespace `json:"namespaces,omitempty"`
	Authorizer []authorizerRule   `json:"authorizer,omitempty"`
	Params     []map[string]any   `json:"params,omitempty"`
	name       string             // for messages
	objects    []*unstructured.Unstructured
}

// authorizerRule is one answer of the authorizer: a check whose attributes
// match every field set (empty matches anything; group matches any of the
// user's groups) is allowed or denied. A check no rule matches is denied.
type authorizerRule struct {
	User        string `json:"user,omitempty"`
	Group       string `json:"group,omitempty"`
	Verb        string `json:"verb,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	Path        string `json:"path,omitempty"`
	Allowed     bool   `json:"allowed"`
}

func (r authorizerRule) matches(a authorizer.Attributes) bool {
	is := func(want, got string) bool { return want == "" || want == "*" || want == got }
	inGroup := r.Group == ""
	if u := a.GetUser(); u != nil {
		for _, g := range u.GetGroups() {
			inGroup = inGroup || g == r.Group
		}
		if !is(r.User, u.GetName()) {
			return false
		}
	}
	if !a.IsResourceRequest() {
		return inGroup && is(r.Verb, a.GetVerb()) && is(r.Path, a.GetPath())
	}
	return inGroup && is(r.Verb, a.GetVerb()) && is(r.APIGroup, a.GetAPIGroup()) && is(r.Resource, a.GetResource()) &&
		is(r.Subresource, a.GetSubresource()) && is(r.Namespace, a.GetNamespace()) && is(r.Name, a.GetName())
}

// check validates the section; file names it in errors.
func (tc *testCluster) check(file string) error {
	seen := map[string]bool{}
	for i, ns := range tc.Namespaces {
		if ns.Name == "" {
			return fmt.Errorf("%s: cluster.namespaces[%d]: metadata.name is required", file, i)
		}
		if seen[ns.Name] {
			return fmt.Errorf("%s: cluster.namespaces[%d]: namespace %q is given twice", file, i, ns.Name)
		}
		seen[ns.Name] = true
	}
	for i, p := range tc.Params {
		u := &unstructured.Unstructured{Object: p}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return fmt.Errorf("%s: cluster.params[%d]: apiVersion, kind and metadata.name are required", file, i)
		}
		tc.objects = append(tc.objects, u)
	}
	tc.name = file
	return nil
}

// reader is the cluster the section describes. A param kind is namespaced
// when it is a built-in namespaced kind or its objects have a namespace.
func (tc *testCluster) reader() cluster.Reader {
	c := &cluster.Static{ClusterName: "test", Namespaces: map[string]*corev1.Namespace{}, Objects: tc.objects, Namespaced: map[schema.GroupVersionKind]bool{}}
	for i := range tc.Namespaces {
		ns := &tc.Namespaces[i]
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		// As kube-apiserver labels every namespace.
		ns.Labels["kubernetes.io/metadata.name"] = ns.Name
		c.Namespaces[ns.Name] = ns
	}
	for _, o := range tc.objects {
		if o.GetNamespace() != "" {
			c.Namespaced[o.GroupVersionKind()] = true
		}
	}
	for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}} {
		c.Namespaced[gvk] = true
	}
	rules := tc.Authorizer
	c.Allow = func(a authorizer.Attributes) bool {
		for _, r := range rules {
			if r.matches(a) {
				return r.Allowed
			}
		}
		return false
	}
	return c
}
