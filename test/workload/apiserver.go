package workload

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Call is what kube-apiserver does with a write for one webhook.
type Call int

const (
	NotSent  Call = iota // its rules or selectors do not match
	Skipped              // its matchConditions are false (or failed under Ignore)
	Sent                 // it calls the function
	Rejected             // a matchCondition failed under Fail
)

func (c Call) String() string { return [...]string{"not sent", "skipped", "sent", "rejected"}[c] }

// APIServer decides, with kube-apiserver's own webhook matching packages
// (the rule, namespace and object selector matchers and the matchConditions
// matcher its dispatcher calls), which webhooks a write reaches. Requests
// for resources with equivalents in other groups or versions are not
// modelled: the workload has none.
type APIServer struct {
	namespaces namespace.Matcher
	compiler   plugincel.ConditionCompiler
}

// NewAPIServer is an apiserver whose namespaces are ns.
func NewAPIServer(ns ...*corev1.Namespace) *APIServer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range ns {
		idx.Add(n)
	}
	return &APIServer{
		namespaces: namespace.Matcher{NamespaceLister: listersv1.NewNamespaceLister(idx)},
		compiler:   plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())),
	}
}

// Webhooks are the webhooks of rendered configurations, as kube-apiserver
// holds them.
func Webhooks(v *admissionregistrationv1.ValidatingWebhookConfiguration, m *admissionregistrationv1.MutatingWebhookConfiguration) []webhook.WebhookAccessor {
	var out []webhook.WebhookAccessor
	if m != nil {
		for i := range m.Webhooks {
			out = append(out, webhook.NewMutatingWebhookAccessor(fmt.Sprintf("m%d", i), m.Name, &m.Webhooks[i]))
		}
	}
	if v != nil {
		for i := range v.Webhooks {
			out = append(out, webhook.NewValidatingWebhookAccessor(fmt.Sprintf("v%d", i), v.Name, &v.Webhooks[i]))
		}
	}
	return out
}

// Attributes are the write as kube-apiserver's admission sees it.
func (w Write) Attributes() (*admission.VersionedAttributes, error) {
	newObj, err := w.New()
	if err != nil {
		return nil, err
	}
	var o, old runtime.Object
	if newObj != nil {
		o = newObj
	}
	if w.Old != nil && w.Verb != "create" {
		old = w.Old
	}
	op := map[string]admission.Operation{"create": admission.Create, "patch": admission.Update, "delete": admission.Delete}[w.Verb]
	gvk := schema.GroupVersionKind{Group: w.Resource.Group, Version: w.Resource.Version, Kind: w.Kind}
	attr := admission.NewAttributesRecord(o, old, gvk, w.Namespace, w.Name, w.Resource, w.Subresource, op, nil, true,
		&user.DefaultInfo{Name: w.As.User, Groups: w.As.Groups})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk}
	if o != nil {
		va.VersionedObject = admission.NewLazyObject(o)
	}
	if old != nil {
		va.VersionedOldObject = admission.NewLazyObject(old)
	}
	return va, nil
}

// Review is the AdmissionReview kube-apiserver sends the function for the
// write.
func (w Write) Review() ([]byte, error) {
	va, err := w.Attributes()
	if err != nil {
		return nil, err
	}
	req := plugincel.CreateAdmissionRequest(va.Attributes, metav1.GroupVersionResource(va.GetResource()), metav1.GroupVersionKind(va.VersionedKind))
	for _, x := range []struct {
		obj runtime.Object
		to  *runtime.RawExtension
	}{{va.GetObject(), &req.Object}, {va.GetOldObject(), &req.OldObject}} {
		if x.obj == nil {
			continue
		}
		raw, err := json.Marshal(x.obj)
		if err != nil {
			return nil, err
		}
		x.to.Raw = raw
	}
	req.UID = "00000000-0000-0000-0000-000000000001"
	return json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
}

// Decide is what kube-apiserver does with w for hook, and the error of a
// rejection.
func (a *APIServer) Decide(w Write, hook webhook.WebhookAccessor) (Call, error) {
	va, err := w.Attributes()
	if err != nil {
		return NotSent, err
	}
	if ok, err := a.namespaces.MatchNamespaceSelector(hook, va.Attributes); err != nil {
		return NotSent, err
	} else if !ok {
		return NotSent, nil
	}
	if ok, err := (&object.Matcher{}).MatchObjectSelector(hook, va.Attributes); err != nil {
		return NotSent, err
	} else if !ok {
		return NotSent, nil
	}
	matched := false
	for _, r := range hook.GetRules() {
		if (&rules.Matcher{Rule: r, Attr: va.Attributes}).Matches() {
			matched = true
			break
		}
	}
	if !matched {
		return NotSent, nil
	}
	if len(hook.GetMatchConditions()) == 0 {
		return Sent, nil
	}
	res := hook.GetCompiledMatcher(a.compiler).Match(context.Background(), va, nil, nil)
	switch {
	case res.Error != nil:
		return Rejected, res.Error
	case !res.Matches:
		return Skipped, nil
	}
	return Sent, nil
}
