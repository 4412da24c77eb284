package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/schema"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// gatekeeper is Gatekeeper's constraint client with the K8sNativeValidation
// driver only, as its webhook reviews an admission request. Each of
// admitfn's policies is a ConstraintTemplate whose K8sNativeValidation
// source holds the policy's variables, validations (expression, message,
// messageExpression: a source has no reason), match conditions and failure
// policy, and one constraint of it matching the kinds of the policy's
// resource rules.
type gatekeeper struct {
	client *constraintclient.Client
	// names are the policies' names by constraint name.
	names map[string]string
}

// gatekeeperObjects are admitfn's policies as Gatekeeper templates and
// constraints, and the policies' names by constraint name.
func gatekeeperObjects(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) ([]*templates.ConstraintTemplate, []*unstructured.Unstructured, map[string]string, error) {
	var templs []*templates.ConstraintTemplate
	var constraints []*unstructured.Unstructured
	names := map[string]string{}
	for _, vap := range vaps {
		kind := kindName(vap.Name)
		src := schema.Source{}
		for _, v := range vap.Spec.Variables {
			src.Variables = append(src.Variables, schema.Variable{Name: v.Name, Expression: v.Expression})
		}
		for _, v := range vap.Spec.Validations {
			src.Validations = append(src.Validations, schema.Validation{Expression: v.Expression, Message: v.Message, MessageExpression: v.MessageExpression})
		}
		for _, c := range vap.Spec.MatchConditions {
			src.MatchConditions = append(src.MatchConditions, schema.MatchCondition{Name: c.Name, Expression: c.Expression})
		}
		if vap.Spec.FailurePolicy != nil {
			fp := string(*vap.Spec.FailurePolicy)
			src.FailurePolicy = &fp
		}
		var value map[string]any
		if err := roundTrip(src, &value); err != nil {
			return nil, nil, nil, err
		}
		templs = append(templs, &templates.ConstraintTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: "templates.gatekeeper.sh/v1", Kind: "ConstraintTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind)},
			Spec: templates.ConstraintTemplateSpec{
				CRD: templates.CRD{Spec: templates.CRDSpec{Names: templates.Names{Kind: kind}}},
				Targets: []templates.Target{{
					Target: target.Name,
					Code:   []templates.Code{{Engine: schema.Name, Source: &templates.Anything{Value: value}}},
				}},
			},
		})
		var kinds []any
		if mc := vap.Spec.MatchConstraints; mc != nil {
			for _, rule := range mc.ResourceRules {
				var names []any
				for _, r := range rule.Resources {
					if k, ok := resourceKinds[r]; ok {
						names = append(names, k)
					}
				}
				var groups []any
				for _, gr := range rule.APIGroups {
					groups = append(groups, gr)
				}
				kinds = append(kinds, map[string]any{"apiGroups": groups, "kinds": names})
			}
		}
		name := strings.ToLower(kind)
		constraints = append(constraints, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "constraints.gatekeeper.sh/v1beta1",
			"kind":       kind,
			"metadata":   map[string]any{"name": name},
			"spec":       map[string]any{"match": map[string]any{"kinds": kinds}},
		}})
		names[name] = vap.Name
	}
	return templs, constraints, names, nil
}

func newGatekeeper(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) (*gatekeeper, error) {
	templs, constraints, names, err := gatekeeperObjects(vaps)
	if err != nil {
		return nil, err
	}
	driver, err := k8scel.New()
	if err != nil {
		return nil, err
	}
	client, err := constraintclient.NewClient(
		constraintclient.Targets(&target.K8sValidationTarget{}),
		constraintclient.Driver(driver),
		constraintclient.EnforcementPoints(util.WebhookEnforcementPoint))
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	for _, templ := range templs {
		if _, err := client.AddTemplate(ctx, templ); err != nil {
			return nil, fmt.Errorf("template %s: %w", templ.Name, err)
		}
	}
	for _, c := range constraints {
		if _, err := client.AddConstraint(ctx, c); err != nil {
			return nil, fmt.Errorf("constraint %s: %w", c.GetName(), err)
		}
	}
	return &gatekeeper{client: client, names: names}, nil
}

func roundTrip(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func (g *gatekeeper) decide(ctx context.Context, body []byte) (map[string][]string, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, err
	}
	aug := &target.AugmentedReview{AdmissionRequest: review.Request, Source: mutationtypes.SourceTypeOriginal, IsAdmission: true}
	resp, err := g.client.Review(ctx, aug, reviews.EnforcementPoint(util.WebhookEnforcementPoint))
	if err != nil {
		return nil, err
	}
	denied := map[string][]string{}
	for _, r := range resp.Results() {
		name := g.names[r.Constraint.GetName()]
		if name == "" {
			return nil, fmt.Errorf("a result of an unknown constraint %s", r.Constraint.GetName())
		}
		denied[name] = append(denied[name], r.Msg)
	}
	return denied, nil
}
