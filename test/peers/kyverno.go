package main

import (
	"context"
	"encoding/json"
	"fmt"

	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	celengine "github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	vpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/vpol/compiler"
	vpolengine "github.com/kyverno/kyverno/pkg/cel/policies/vpol/engine"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kyverno is Kyverno's ValidatingPolicy engine. A ValidatingPolicy is a
// superset of a ValidatingAdmissionPolicy: each of admitfn's policies is
// the same spec (match, variables, validations, failure policy) with
// validationActions Deny, and no policies generated for pod controllers
// (the work reviews Pods).
type kyverno struct{ engine vpolengine.Engine }

// kyvernoPolicies are admitfn's policies as Kyverno ValidatingPolicies.
func kyvernoPolicies(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) []*policiesv1beta1.ValidatingPolicy {
	var policies []*policiesv1beta1.ValidatingPolicy
	for _, vap := range vaps {
		policies = append(policies, &policiesv1beta1.ValidatingPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policies.kyverno.io/v1beta1", Kind: "ValidatingPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
			Spec: policiesv1beta1.ValidatingPolicySpec{
				MatchConstraints: vap.Spec.MatchConstraints,
				MatchConditions:  vap.Spec.MatchConditions,
				Variables:        vap.Spec.Variables,
				Validations:      vap.Spec.Validations,
				AuditAnnotations: vap.Spec.AuditAnnotations,
				FailurePolicy:    vap.Spec.FailurePolicy,
				ValidationAction: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				AutogenConfiguration: &policiesv1beta1.ValidatingPolicyAutogenConfiguration{
					PodControllers: &policiesv1beta1.PodControllersGenerationConfiguration{Controllers: []string{}},
				},
			},
		})
	}
	return policies
}

func newKyverno(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) (*kyverno, error) {
	var policies []policiesv1beta1.ValidatingPolicyLike
	for _, p := range kyvernoPolicies(vaps) {
		policies = append(policies, p)
	}
	provider, err := vpolengine.NewProvider(vpolcompiler.NewCompiler(), policies, nil)
	if err != nil {
		return nil, err
	}
	noNamespace := func(string) *corev1.Namespace { return nil }
	return &kyverno{engine: vpolengine.NewEngine(provider, noNamespace, matching.NewMatcher())}, nil
}

func (k *kyverno) decide(ctx context.Context, body []byte) (map[string][]string, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, err
	}
	resp, err := k.engine.Handle(ctx, celengine.RequestFromAdmission(nil, *review.Request), nil)
	if err != nil {
		return nil, err
	}
	denied := map[string][]string{}
	for _, p := range resp.Policies {
		for _, r := range p.Rules {
			switch r.Status() {
			case engineapi.RuleStatusFail:
				denied[p.Policy.GetName()] = append(denied[p.Policy.GetName()], r.Message())
			case engineapi.RuleStatusError:
				return nil, fmt.Errorf("policy %s: %s", p.Policy.GetName(), r.Message())
			}
		}
	}
	return denied, nil
}
