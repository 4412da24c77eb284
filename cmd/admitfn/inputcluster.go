package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/lint"
	"github.com/admitfn/admitfn/core/policy"
)

// inputCluster is the cluster apply -f models from its input: the
// namespaces it defines (Namespace objects, --namespace-labels and
// --namespace-annotations), whole, as a function with cluster access reads
// them for namespaceObject; any other namespace by its name alone, as a
// function without. It has no authorizer and no params but the bundle's
// (cluster.NamespacesOnly): apply names the bindings that read them
// (clusterWarnings).
type inputCluster struct {
	cluster.Static
}

func (*inputCluster) NamespacesOnly() {}

func (c *inputCluster) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if ns, ok := c.Namespaces[name]; ok {
		return ns, nil
	}
	ns := &corev1.Namespace{}
	ns.Name = name
	// As kube-apiserver labels every namespace.
	ns.Labels = map[string]string{"kubernetes.io/metadata.name": name}
	return ns, nil
}

// defines reports whether the input gives namespace name.
func (c *inputCluster) defines(name string) bool {
	_, ok := c.Namespaces[name]
	return ok
}

// namespacesOf builds apply's cluster from the Namespace objects among
// items and the labels and annotations flags give (which win).
func namespacesOf(items []manifest, labels, annotations map[string]map[string]string) (*inputCluster, error) {
	c := &inputCluster{cluster.Static{ClusterName: "input", Namespaces: map[string]*corev1.Namespace{}, Namespaced: map[schema.GroupVersionKind]bool{}}}
	for _, m := range items {
		if m.obj.GetAPIVersion() != "v1" || m.obj.GetKind() != "Namespace" {
			continue
		}
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, ns); err != nil {
			return nil, fmt.Errorf("%s:%d: Namespace %s: %w", displayFile(m.file), m.line, m.obj.GetName(), err)
		}
		c.Namespaces[ns.Name] = ns
	}
	for name, ls := range labels {
		ns := c.namespace(name)
		ns.Labels = ls
	}
	for name, as := range annotations {
		ns := c.namespace(name)
		ns.Annotations = as
	}
	for name, ns := range c.Namespaces {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["kubernetes.io/metadata.name"] = name
	}
	return c, nil
}

// namespace is the namespace name of c, added if the input has none.
func (c *inputCluster) namespace(name string) *corev1.Namespace {
	ns, ok := c.Namespaces[name]
	if !ok {
		ns = &corev1.Namespace{}
		ns.Name = name
		c.Namespaces[name] = ns
	}
	return ns
}

// clusterWarnings say, per binding that reads the cluster, what apply -f
// decides it without: namespaces the input does not define (when the
// binding reads namespaceObject beyond its name), the authorizer, params
// from the cluster. The function with cluster access would read them.
func clusterWarnings(set *policy.Set, items []manifest, input *inputCluster, o applyOptions) []string {
	var undefined []string
	for _, m := range items {
		obj := m.obj.DeepCopy()
		defaultNamespace(obj, o.namespace)
		if ns := obj.GetNamespace(); ns != "" && !input.defines(ns) && !o.sent.skips(ns) && !slices.Contains(undefined, ns) {
			undefined = append(undefined, ns)
		}
	}
	sort.Strings(undefined)
	var out []string
	for _, r := range lint.ClusterReads(set) {
		var without []string
		for _, w := range r.What {
			switch {
			case strings.HasPrefix(w, "namespaceObject"):
				if len(undefined) > 0 {
					without = append(without, w+" of namespace "+strings.Join(undefined, ", ")+" (no Namespace object in the input, no --namespace-labels or --namespace-annotations)")
				}
			default:
				without = append(without, w)
			}
		}
		if len(without) > 0 {
			out = append(out, fmt.Sprintf("binding %s (policy %s) reads %s, which apply -f does not have: it decides as a function without cluster access does (docs/differences.md); apply --cluster reads them", r.Binding, r.Policy, strings.Join(without, ", ")))
		}
	}
	return out
}
