package render

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/admitfn/admitfn/core/policy"
)

func groups() []*policy.Group {
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
	}
	return []*policy.Group{
		{ID: "", NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, FailurePolicy: admissionregistrationv1.Fail, Rules: []admissionregistrationv1.RuleWithOperations{rule}},
		{ID: "abc123", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}, ObjectSelector: &metav1.LabelSelector{}, FailurePolicy: admissionregistrationv1.Ignore, Rules: []admissionregistrationv1.RuleWithOperations{rule}},
	}
}

func TestValidating(t *testing.T) {
	cfg, err := Validating(groups(), Options{URL: "https://fn.example.com/prod/", CABundle: []byte("PEM")})
	if err != nil {
		t.Fatal(err)
	}
	notKubeSystem := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}
	type hook struct {
		name, url string
		fp        admissionregistrationv1.FailurePolicyType
		ns        *metav1.LabelSelector
	}
	var got []hook
	for _, w := range cfg.Webhooks {
		got = append(got, hook{w.Name, *w.ClientConfig.URL, *w.FailurePolicy, w.NamespaceSelector})
		if *w.MatchPolicy != admissionregistrationv1.Equivalent || *w.SideEffects != admissionregistrationv1.SideEffectClassNone || *w.TimeoutSeconds != 10 ||
			!reflect.DeepEqual(w.AdmissionReviewVersions, []string{"v1", "v1beta1"}) || string(w.ClientConfig.CABundle) != "PEM" || len(w.Rules) != 1 {
			t.Errorf("webhook %s: %+v", w.Name, w)
		}
	}
	want := []hook{
		{"validate.admitfn.io", "https://fn.example.com/prod/validate", "Fail", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notKubeSystem}}},
		{"abc123.validate.admitfn.io", "https://fn.example.com/prod/validate/abc123", "Ignore", &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}, MatchExpressions: []metav1.LabelSelectorRequirement{notKubeSystem}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("webhooks:\n got %+v\nwant %+v", got, want)
	}
	if cfg.Name != "admitfn" || cfg.Kind != "ValidatingWebhookConfiguration" || cfg.APIVersion != "admissionregistration.k8s.io/v1" {
		t.Errorf("object meta: %+v %+v", cfg.TypeMeta, cfg.ObjectMeta)
	}

	cfg, err = Validating(groups(), Options{URL: "https://10.0.0.1:8443", IncludeKubeSystem: true, TimeoutSeconds: 5, Name: "policies"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Webhooks[0].NamespaceSelector, &metav1.LabelSelector{}) || *cfg.Webhooks[0].TimeoutSeconds != 5 || cfg.Name != "policies" || *cfg.Webhooks[0].ClientConfig.URL != "https://10.0.0.1:8443/validate" {
		t.Errorf("with kube-system: %+v", cfg.Webhooks[0])
	}
	// Excluded namespaces join kube-system, sorted, or stand alone when
	// kube-system is included; a name no namespace can have is refused.
	for _, tc := range []struct {
		include bool
		exclude []string
		want    []string
	}{
		{false, []string{"admitfn-system", "a"}, []string{"a", "admitfn-system", "kube-system"}},
		{false, []string{"kube-system"}, []string{"kube-system"}},
		{true, []string{"admitfn-system"}, []string{"admitfn-system"}},
	} {
		opts := Options{URL: "https://fn.example.com", IncludeKubeSystem: tc.include, ExcludeNamespaces: tc.exclude}
		cfg, err := Validating(groups(), opts)
		if err != nil {
			t.Fatal(err)
		}
		want := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: tc.want}}}
		if got := cfg.Webhooks[0].NamespaceSelector; !reflect.DeepEqual(got, want) || opts.Check() != nil {
			t.Errorf("include %v, exclude %v: %+v, want %+v (check: %v)", tc.include, tc.exclude, got, want, opts.Check())
		}
	}
	if err := (Options{URL: "https://fn.example.com", ExcludeNamespaces: []string{"Bad_NS"}}).Check(); err == nil || !strings.HasPrefix(err.Error(), `namespace "Bad_NS": a lowercase RFC 1123 label`) {
		t.Errorf("a bad namespace: %v", err)
	}
	// Another name gives the webhooks names of their own.
	var names []string
	for _, w := range cfg.Webhooks {
		names = append(names, w.Name)
	}
	if names[0] != "validate.policies.admitfn.io" || !strings.HasSuffix(names[1], ".validate.policies.admitfn.io") {
		t.Errorf("webhook names with -name policies: %v", names)
	}
	// The input groups are not modified.
	if !reflect.DeepEqual(groups()[1].NamespaceSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}) {
		t.Error("groups modified")
	}
}

// A cluster's configuration calls the function on the cluster's URLs;
// nothing else changes.
func TestClusterURLs(t *testing.T) {
	plain, err := Validating(groups(), Options{URL: "https://fn.example.com/TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Validating(groups(), Options{URL: "https://fn.example.com/TOKEN", Cluster: "prod-eu"})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i, w := range cfg.Webhooks {
		urls = append(urls, *w.ClientConfig.URL)
		w.ClientConfig.URL = plain.Webhooks[i].ClientConfig.URL
		if !reflect.DeepEqual(w, plain.Webhooks[i]) {
			t.Errorf("webhook %d differs beyond its URL:\n%+v\n%+v", i, w, plain.Webhooks[i])
		}
	}
	want := []string{"https://fn.example.com/TOKEN/clusters/prod-eu/validate", "https://fn.example.com/TOKEN/clusters/prod-eu/validate/abc123"}
	if !reflect.DeepEqual(urls, want) {
		t.Errorf("URLs %q\nwant %q", urls, want)
	}
}

func TestValidatingRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "a URL is required: https://host[:port][/prefix]"},
		{Options{URL: "http://fn.example.com"}, `invalid URL "http://fn.example.com": kube-apiserver only calls webhooks over https`},
		{Options{URL: "https:///path"}, `invalid URL "https:///path": a host is required`},
		{Options{URL: "https://user:pw@fn.example.com"}, `invalid URL "https://user:pw@fn.example.com": user information is not allowed`},
		{Options{URL: "https://fn.example.com/?token=1"}, `invalid URL "https://fn.example.com/?token=1": query and fragment are not allowed`},
		{Options{URL: "https://fn.example.com", TimeoutSeconds: 31}, "timeout 31s out of range: kube-apiserver accepts 1 to 30 seconds"},
		{Options{URL: "https://fn.example.com", TimeoutSeconds: -1}, "timeout -1s out of range: kube-apiserver accepts 1 to 30 seconds"},
		{Options{URL: "https://fn.example.com", Cluster: "Prod/EU"}, `cluster "Prod/EU": want a DNS label (a-z, 0-9 and -, at most 63)`},
	} {
		_, err := Validating(groups(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestMutating(t *testing.T) {
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}
	all := append(groups(), // validating groups are left to Validating
		&policy.Group{Type: policy.Mutating, NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, FailurePolicy: admissionregistrationv1.Fail,
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy, Rules: []admissionregistrationv1.RuleWithOperations{rule}},
		&policy.Group{Type: policy.Mutating, ID: "f00d", NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "yes"}},
			FailurePolicy: admissionregistrationv1.Ignore, ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy, Rules: []admissionregistrationv1.RuleWithOperations{rule}},
	)
	cfg, err := Mutating(all, Options{URL: "https://fn.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	type hook struct {
		name, url string
		fp        admissionregistrationv1.FailurePolicyType
		rp        admissionregistrationv1.ReinvocationPolicyType
		obj       map[string]string
	}
	var got []hook
	for _, w := range cfg.Webhooks {
		got = append(got, hook{w.Name, *w.ClientConfig.URL, *w.FailurePolicy, *w.ReinvocationPolicy, w.ObjectSelector.MatchLabels})
		if *w.SideEffects != admissionregistrationv1.SideEffectClassNone || *w.MatchPolicy != admissionregistrationv1.Equivalent || len(w.Rules) != 1 ||
			len(w.NamespaceSelector.MatchExpressions) != 1 || w.NamespaceSelector.MatchExpressions[0].Values[0] != "kube-system" {
			t.Errorf("webhook %s: %+v", w.Name, w)
		}
	}
	want := []hook{
		{"mutate.admitfn.io", "https://fn.example.com/mutate", "Fail", "Never", nil},
		{"f00d.mutate.admitfn.io", "https://fn.example.com/mutate/f00d", "Ignore", "IfNeeded", map[string]string{"inject": "yes"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("webhooks:\n got %+v\nwant %+v", got, want)
	}
	if cfg.Kind != "MutatingWebhookConfiguration" || cfg.Name != "admitfn" {
		t.Errorf("object meta: %+v %+v", cfg.TypeMeta, cfg.ObjectMeta)
	}
}
