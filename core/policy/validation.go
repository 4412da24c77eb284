package policy

import (
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The static rules below are the ones kube-apiserver enforces when the
// objects are created (pkg/apis/admissionregistration/validation), minus CEL
// compilation, which the validate package does with the same compiler.

var (
	supportedFailurePolicies = sets.New(string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore))
	supportedOperations      = sets.New("*", string(admissionregistrationv1.Create), string(admissionregistrationv1.Update), string(admissionregistrationv1.Delete), string(admissionregistrationv1.Connect))
	supportedScopes          = sets.New(string(admissionregistrationv1.AllScopes), string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope))
	// kube-apiserver's supportedValidationPolicyReason: Unauthorized is not
	// accepted on create, although the dispatcher could map it to 401.
	supportedReasons  = sets.New(string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge))
	supportedActions  = sets.New(string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn), string(admissionregistrationv1.Audit))
	supportedNotFound = sets.New(string(admissionregistrationv1.DenyAction), string(admissionregistrationv1.AllowAction))
	// MutatingAdmissionPolicy: DELETE has no object to mutate.
	supportedMutatingOperations = sets.New("*", string(admissionregistrationv1.Create), string(admissionregistrationv1.Update), string(admissionregistrationv1.Connect))
	supportedPatchTypes         = sets.New(string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch))
	supportedReinvocation       = sets.New(string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))
	celIdent                    = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved                 = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")
)

const maxAuditAnnotations = 20

func (b *Set) validate() (invalid map[string]bool, errs Errors) {
	invalid = map[string]bool{}
	report := func(kind, what, name string, fe field.ErrorList) {
		for _, e := range fe {
			origin := b.Origin(kind, name)
			errs = append(errs, AtOrigin(origin, fmt.Errorf("%s: %s %s: %s", origin.File, what, name, e.Error())))
			invalid[kind+"/"+name] = true
		}
	}
	// A binding naming a policy the bundle lacks would do nothing in-cluster.
	orphan := func(policyName string, found bool) field.ErrorList {
		if policyName == "" || found {
			return nil
		}
		return field.ErrorList{field.NotFound(field.NewPath("spec", "policyName"), policyName)}
	}
	for _, p := range b.Policies {
		report("ValidatingAdmissionPolicy", "policy", p.Name, validatePolicy(p))
	}
	for _, pb := range b.Bindings {
		report("ValidatingAdmissionPolicyBinding", "binding", pb.Name,
			append(validateBinding(pb), orphan(pb.Spec.PolicyName, b.Policy(pb.Spec.PolicyName) != nil)...))
	}
	for _, p := range b.MutatingPolicies {
		report("MutatingAdmissionPolicy", "policy", p.Name, validateMutatingPolicy(p))
	}
	for _, pb := range b.MutatingBindings {
		report("MutatingAdmissionPolicyBinding", "binding", pb.Name,
			append(validateMutatingBinding(pb), orphan(pb.Spec.PolicyName, b.MutatingPolicy(pb.Spec.PolicyName) != nil)...))
	}
	return invalid, errs
}

func validateName(name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

func validatePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	s := &p.Spec
	errs := validatePolicyHead(p.Name, s.FailurePolicy, s.ParamKind, s.MatchConstraints)
	errs = append(errs, validateMatchConditions(s.MatchConditions, spec.Child("matchConditions"))...)
	errs = append(errs, validateVariables(s.Variables, spec.Child("variables"))...)
	if len(s.Validations) == 0 && len(s.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(spec.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i, v := range s.Validations {
		fld := spec.Child("validations").Index(i)
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(fld.Child("expression"), "expression is not specified"))
		}
		if len(v.MessageExpression) > 0 && strings.TrimSpace(v.MessageExpression) == "" {
			errs = append(errs, field.Invalid(fld.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
		}
		msg := strings.TrimSpace(v.Message)
		if len(v.Message) > 0 && msg == "" {
			errs = append(errs, field.Invalid(fld.Child("message"), v.Message, "must be non-empty if specified"))
		} else if strings.ContainsAny(msg, "\n\r") {
			errs = append(errs, field.Invalid(fld.Child("message"), v.Message, "must not contain line breaks"))
		}
		if v.Reason != nil && !supportedReasons.Has(string(*v.Reason)) {
			errs = append(errs, field.NotSupported(fld.Child("reason"), *v.Reason, sets.List(supportedReasons)))
		}
	}
	if len(s.AuditAnnotations) > maxAuditAnnotations {
		errs = append(errs, field.TooMany(spec.Child("auditAnnotations"), len(s.AuditAnnotations), maxAuditAnnotations))
	}
	keys := sets.New[string]()
	for i, a := range s.AuditAnnotations {
		fld := spec.Child("auditAnnotations").Index(i)
		if a.Key == "" {
			errs = append(errs, field.Required(fld.Child("key"), ""))
		} else {
			// The published key is "<policy name>/<key>": it must be a
			// qualified name, as kube-apiserver checks.
			for _, msg := range utilvalidation.IsQualifiedName(p.Name + "/" + a.Key) {
				errs = append(errs, field.Invalid(fld.Child("key"), a.Key, msg))
			}
			if keys.Has(a.Key) {
				errs = append(errs, field.Duplicate(fld.Child("key"), a.Key))
			}
			keys.Insert(a.Key)
		}
		if strings.TrimSpace(a.ValueExpression) == "" {
			errs = append(errs, field.Required(fld.Child("valueExpression"), "valueExpression is not specified"))
		} else if len(a.ValueExpression) > 5*1024 {
			errs = append(errs, field.TooLong(fld.Child("valueExpression"), "", 5*1024))
		}
	}
	return errs
}

// validatePolicyHead checks what both policy kinds share ahead of their
// own fields: name, failurePolicy, paramKind and matchConstraints (which
// need a resource rule to give expressions their types).
func validatePolicyHead(name string, fp *admissionregistrationv1.FailurePolicyType, pk *admissionregistrationv1.ParamKind, mc *admissionregistrationv1.MatchResources) field.ErrorList {
	errs := validateName(name, field.NewPath("metadata", "name"))
	spec := field.NewPath("spec")
	if fp != nil && !supportedFailurePolicies.Has(string(*fp)) {
		errs = append(errs, field.NotSupported(spec.Child("failurePolicy"), *fp, sets.List(supportedFailurePolicies)))
	}
	if pk != nil {
		errs = append(errs, validateParamKind(pk, spec.Child("paramKind"))...)
	}
	if mc == nil {
		return append(errs, field.Required(spec.Child("matchConstraints"), ""))
	}
	errs = append(errs, validateMatchResources(mc, spec.Child("matchConstraints"))...)
	if len(mc.ResourceRules) == 0 {
		errs = append(errs, field.Required(spec.Child("matchConstraints", "resourceRules"), ""))
	}
	return errs
}

func validateMatchConditions(conditions []admissionregistrationv1.MatchCondition, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, mc := range conditions {
		fld := fld.Index(i)
		if mc.Name == "" {
			errs = append(errs, field.Required(fld.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(mc.Name) {
				errs = append(errs, field.Invalid(fld.Child("name"), mc.Name, msg))
			}
			if names.Has(mc.Name) {
				errs = append(errs, field.Duplicate(fld.Child("name"), mc.Name))
			}
			names.Insert(mc.Name)
		}
		if strings.TrimSpace(mc.Expression) == "" {
			errs = append(errs, field.Required(fld.Child("expression"), ""))
		}
	}
	if len(conditions) > 64 {
		errs = append(errs, field.TooMany(fld, len(conditions), 64))
	}
	return errs
}

func validateVariables(variables []admissionregistrationv1.Variable, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	vars := sets.New[string]()
	for i, v := range variables {
		fld := fld.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(fld.Child("name"), "name is not specified"))
		case !celIdent.MatchString(v.Name) || celReserved.Has(v.Name):
			errs = append(errs, field.Invalid(fld.Child("name"), v.Name, "name is not a valid CEL identifier"))
		case vars.Has(v.Name):
			errs = append(errs, field.Duplicate(fld.Child("name"), v.Name))
		}
		vars.Insert(v.Name)
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(fld.Child("expression"), "expression is not specified"))
		}
	}
	return errs
}

func validateParamKind(pk *admissionregistrationv1.ParamKind, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(fld.Child("apiVersion"), ""))
	} else if gv, err := schema.ParseGroupVersion(pk.APIVersion); err != nil || gv.Version == "" {
		errs = append(errs, field.Invalid(fld.Child("apiVersion"), pk.APIVersion, "must be group/version or version"))
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(fld.Child("kind"), ""))
	}
	return errs
}

func validateMatchResources(m *admissionregistrationv1.MatchResources, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	if m.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(m.NamespaceSelector, opts, fld.Child("namespaceSelector"))...)
	}
	if m.ObjectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(m.ObjectSelector, opts, fld.Child("objectSelector"))...)
	}
	if m.MatchPolicy != nil && *m.MatchPolicy != admissionregistrationv1.Exact && *m.MatchPolicy != admissionregistrationv1.Equivalent {
		errs = append(errs, field.NotSupported(fld.Child("matchPolicy"), *m.MatchPolicy, []string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}))
	}
	for i, r := range m.ResourceRules {
		errs = append(errs, validateRule(r, fld.Child("resourceRules").Index(i))...)
	}
	for i, r := range m.ExcludeResourceRules {
		errs = append(errs, validateRule(r, fld.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

func validateRule(r admissionregistrationv1.NamedRuleWithOperations, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(fld.Child("operations"), ""))
	}
	for i, op := range r.Operations {
		if !supportedOperations.Has(string(op)) {
			errs = append(errs, field.NotSupported(fld.Child("operations").Index(i), op, sets.List(supportedOperations)))
		}
	}
	if len(r.Operations) > 1 && sets.New(r.Operations...).Has(admissionregistrationv1.OperationAll) {
		errs = append(errs, field.Invalid(fld.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(fld.Child("apiGroups"), ""))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(fld.Child("apiVersions"), ""))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(fld.Child("resources"), ""))
	}
	for i, res := range r.Resources {
		if res == "" {
			errs = append(errs, field.Required(fld.Child("resources").Index(i), ""))
		}
		if parts := strings.SplitN(res, "/", 2); len(parts) == 2 && parts[1] == "" {
			errs = append(errs, field.Invalid(fld.Child("resources").Index(i), res, "subresource must not be empty"))
		}
	}
	if r.Scope != nil && !supportedScopes.Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(fld.Child("scope"), *r.Scope, sets.List(supportedScopes)))
	}
	return errs
}

func validateBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	errs := validateName(b.Name, field.NewPath("metadata", "name"))
	spec := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	}
	if b.Spec.MatchResources != nil {
		errs = append(errs, validateMatchResources(b.Spec.MatchResources, spec.Child("matchResources"))...)
	}
	if len(b.Spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(spec.Child("validationActions"), ""))
	}
	actions := sets.New[admissionregistrationv1.ValidationAction]()
	for i, a := range b.Spec.ValidationActions {
		fld := spec.Child("validationActions").Index(i)
		if !supportedActions.Has(string(a)) {
			errs = append(errs, field.NotSupported(fld, a, sets.List(supportedActions)))
		}
		if actions.Has(a) {
			errs = append(errs, field.Duplicate(fld, a))
		}
		actions.Insert(a)
	}
	if actions.Has(admissionregistrationv1.Deny) && actions.Has(admissionregistrationv1.Warn) {
		errs = append(errs, field.Invalid(spec.Child("validationActions"), b.Spec.ValidationActions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	errs = append(errs, validateParamRef(b.Spec.ParamRef, spec.Child("paramRef"))...)
	return errs
}

func validateParamRef(pr *admissionregistrationv1.ParamRef, fld *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	if pr.Name != "" && pr.Selector != nil {
		errs = append(errs, field.Forbidden(fld.Child("name"), "name and selector are mutually exclusive"))
	}
	if pr.Name == "" && pr.Selector == nil {
		errs = append(errs, field.Required(fld, "one of name or selector must be specified"))
	}
	if pr.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
	}
	if pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction == "" {
		errs = append(errs, field.Required(fld.Child("parameterNotFoundAction"), ""))
	} else if !supportedNotFound.Has(string(*pr.ParameterNotFoundAction)) {
		errs = append(errs, field.NotSupported(fld.Child("parameterNotFoundAction"), *pr.ParameterNotFoundAction, sets.List(supportedNotFound)))
	}
	return errs
}

// validateMutatingPolicy is kube-apiserver's create validation of a
// MutatingAdmissionPolicy, CEL compilation aside.
func validateMutatingPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	s := &p.Spec
	errs := validatePolicyHead(p.Name, s.FailurePolicy, s.ParamKind, s.MatchConstraints)
	if s.MatchConstraints != nil {
		errs = append(errs, validateMutatingOperations(s.MatchConstraints.ResourceRules, spec.Child("matchConstraints", "resourceRules", "operations"))...)
	}
	errs = append(errs, validateMatchConditions(s.MatchConditions, spec.Child("matchConditions"))...)
	errs = append(errs, validateVariables(s.Variables, spec.Child("variables"))...)
	if len(s.Mutations) == 0 {
		errs = append(errs, field.Required(spec.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range s.Mutations {
		fld := spec.Child("mutations").Index(i)
		switch m.PatchType {
		case "":
			errs = append(errs, field.Required(fld.Child("patchType"), ""))
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil {
				errs = append(errs, field.Required(fld.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
			} else if strings.TrimSpace(m.JSONPatch.Expression) == "" {
				errs = append(errs, field.Required(fld.Child("jsonPatch", "expression"), ""))
			}
			if m.ApplyConfiguration != nil {
				errs = append(errs, field.Invalid(fld.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
			}
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil {
				errs = append(errs, field.Required(fld.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
			} else if strings.TrimSpace(m.ApplyConfiguration.Expression) == "" {
				errs = append(errs, field.Required(fld.Child("applyConfiguration", "expression"), ""))
			}
			if m.JSONPatch != nil {
				errs = append(errs, field.Invalid(fld.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
			}
		default:
			errs = append(errs, field.NotSupported(fld.Child("patchType"), m.PatchType, sets.List(supportedPatchTypes)))
		}
	}
	switch {
	case s.ReinvocationPolicy == "":
		errs = append(errs, field.Required(spec.Child("reinvocationPolicy"), ""))
	case !supportedReinvocation.Has(string(s.ReinvocationPolicy)):
		errs = append(errs, field.NotSupported(spec.Child("reinvocationPolicy"), s.ReinvocationPolicy, sets.List(supportedReinvocation)))
	}
	return errs
}

// validateMutatingOperations: kube-apiserver never mutates a DELETE.
func validateMutatingOperations(rules []admissionregistrationv1.NamedRuleWithOperations, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range rules {
		for _, op := range r.Operations {
			if !supportedMutatingOperations.Has(string(op)) {
				errs = append(errs, field.NotSupported(fld, op, sets.List(supportedMutatingOperations)))
			}
		}
	}
	return errs
}

func validateMutatingBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	errs := validateName(b.Name, field.NewPath("metadata", "name"))
	spec := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(b.Spec.PolicyName) {
			errs = append(errs, field.Invalid(spec.Child("policyName"), b.Spec.PolicyName, msg))
		}
	}
	errs = append(errs, validateParamRef(b.Spec.ParamRef, spec.Child("paramRef"))...)
	if mr := b.Spec.MatchResources; mr != nil {
		errs = append(errs, validateMatchResources(mr, spec.Child("matchResources"))...)
		errs = append(errs, validateMutatingOperations(mr.ResourceRules, spec.Child("matchResources", "resourceRules", "operations"))...)
	}
	return errs
}
