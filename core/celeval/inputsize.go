package celeval

import (
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
)

// inputSize measures what a condition set's expressions start from on this
// review (the objects, the request, the namespace and the params): the
// longest list or map (l, in entries) and the longest string (t, in bytes,
// never fewer than the runes cel-go's cost model counts) anywhere in them
// (costbound.go). ok is false when one of them is of a kind it does not
// measure: such a set is tracked.
func (a *Attributes) inputSize(va *admission.VersionedAttributes, params runtime.Object, ns *corev1.Namespace) (m measure, ok bool) {
	if !a.shareObjects || !a.requestSized {
		return m, false
	}
	m = a.requestSize
	for _, o := range []struct {
		lazy   *admission.LazyObject
		shared *sharedObject
	}{{&va.VersionedObject, &a.object}, {&va.VersionedOldObject, &a.oldObject}} {
		obj := o.lazy.Object()
		if obj == nil {
			continue
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || o.shared.src != u {
			return m, false
		}
		if !o.shared.sized {
			o.shared.size, o.shared.sized = treeSize(u.Object), true
		}
		m = m.with(o.shared.size)
	}
	if params != nil {
		u, ok := params.(*unstructured.Unstructured)
		if !ok {
			return m, false
		}
		m = m.with(a.paramsSize(u))
	}
	if ns != nil {
		m = m.with(namespaceSize(ns))
	}
	return m, true
}

// measure is the longest list or map (l) and string (t) in some values.
type measure struct{ l, t uint64 }

func (m measure) with(o measure) measure { return measure{max(m.l, o.l), max(m.t, o.t)} }

func (m measure) str(s ...string) measure {
	for _, x := range s {
		m.t = max(m.t, uint64(len(x)))
	}
	return m
}

func (m measure) length(n int) measure { return measure{max(m.l, uint64(n)), m.t} }

// paramsSize measures a params object once per review.
func (a *Attributes) paramsSize(u *unstructured.Unstructured) measure {
	for _, p := range a.params {
		if p.obj == u {
			return p.size
		}
	}
	size := treeSize(u.Object)
	a.params = append(a.params, measured{u, size})
	return size
}

type measured struct {
	obj  *unstructured.Unstructured
	size measure
}

// treeSize measures v as util/json decodes objects.
func treeSize(v any) measure {
	switch v := v.(type) {
	case string:
		return measure{t: uint64(len(v))}
	case map[string]any:
		m := measure{l: uint64(len(v))}
		for k, x := range v {
			m = m.str(k).with(treeSize(x))
		}
		return m
	case []any:
		m := measure{l: uint64(len(v))}
		for _, x := range v {
			m = m.with(treeSize(x))
		}
		return m
	}
	return measure{}
}

// admissionRequestSize measures what the CEL `request` holds of r (its
// structs have fewer fields than minInputLength); ok is false for options
// that are not an unstructured object.
func admissionRequestSize(r *admissionv1.AdmissionRequest) (measure, bool) {
	m := measure{}.str(string(r.UID), r.Kind.Group, r.Kind.Version, r.Kind.Kind,
		r.Resource.Group, r.Resource.Version, r.Resource.Resource, r.SubResource, r.RequestSubResource,
		r.Name, r.Namespace, string(r.Operation), r.UserInfo.Username, r.UserInfo.UID)
	if k := r.RequestKind; k != nil {
		m = m.str(k.Group, k.Version, k.Kind)
	}
	if k := r.RequestResource; k != nil {
		m = m.str(k.Group, k.Version, k.Resource)
	}
	m = m.length(len(r.UserInfo.Groups)).str(r.UserInfo.Groups...).length(len(r.UserInfo.Extra))
	for k, v := range r.UserInfo.Extra {
		m = m.str(k).length(len(v)).str(v...)
	}
	switch o := r.Options.Object.(type) {
	case nil:
	case *unstructured.Unstructured:
		m = m.with(treeSize(o.Object))
	default:
		return m, false
	}
	return m, len(r.Options.Raw) == 0
}

// namespaceSize measures what the CEL `namespaceObject` holds of ns
// (plugincel.CreateNamespaceObject).
func namespaceSize(ns *corev1.Namespace) measure {
	meta := ns.ObjectMeta
	m := measure{}.str(meta.Name, meta.GenerateName, meta.Namespace, string(meta.UID), meta.ResourceVersion, string(ns.Status.Phase))
	m = m.length(len(meta.Labels)).length(len(meta.Annotations)).length(len(meta.Finalizers)).str(meta.Finalizers...)
	for _, kv := range []map[string]string{meta.Labels, meta.Annotations} {
		for k, v := range kv {
			m = m.str(k, v)
		}
	}
	m = m.length(len(ns.Spec.Finalizers)).length(len(ns.Status.Conditions))
	for _, f := range ns.Spec.Finalizers {
		m = m.str(string(f))
	}
	for _, c := range ns.Status.Conditions {
		m = m.str(string(c.Type), string(c.Status), c.Reason, c.Message)
	}
	return m
}
