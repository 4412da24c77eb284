package policy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultPolicy applies the defaults kube-apiserver applies when a
// ValidatingAdmissionPolicy is created (pkg/apis/admissionregistration/v1
// defaults.go), so a bundle behaves exactly like the stored object.
func DefaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fp := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fp
	}
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

// DefaultBinding applies kube-apiserver's defaults to a binding.
func DefaultBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	if b.Spec.MatchResources != nil {
		defaultMatchResources(b.Spec.MatchResources)
	}
}

// DefaultMutatingPolicy applies kube-apiserver's defaults to a
// MutatingAdmissionPolicy: failurePolicy Fail. reinvocationPolicy has no
// default; it is required.
func DefaultMutatingPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fp := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fp
	}
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

// DefaultMutatingBinding applies kube-apiserver's defaults to a
// MutatingAdmissionPolicyBinding.
func DefaultMutatingBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	if b.Spec.MatchResources != nil {
		defaultMatchResources(b.Spec.MatchResources)
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m.MatchPolicy == nil {
		mp := admissionregistrationv1.Equivalent
		m.MatchPolicy = &mp
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		defaultScope(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		defaultScope(&m.ExcludeResourceRules[i].Rule)
	}
}

func defaultScope(r *admissionregistrationv1.Rule) {
	if r.Scope == nil {
		s := admissionregistrationv1.AllScopes
		r.Scope = &s
	}
}
