// Package render builds the ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration that make kube-apiserver call admitfn for a
// bundle: one webhook per policy group, each on its group's route.
package render

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/policy"
)

// DefaultTimeoutSeconds leaves kube-apiserver's default (10s) in place: a
// review takes milliseconds, and a serverless cold start fits well inside.
const DefaultTimeoutSeconds = 10

// Options configures the rendered configuration.
type Options struct {
	// Name of the configurations; "admitfn" when empty.
	Name string
	// URL is the function's base URL: https://host[:port][/prefix].
	URL string
	// Cluster, when set, is the cluster the configuration is for: its URLs
	// carry the name (<URL>/clusters/<name>/validate…), so one function can
	// serve several clusters, each answered from its own.
	Cluster string
	// CABundle is the PEM CA kube-apiserver should trust for URL; empty to
	// use the apiserver's system roots (managed functions have public
	// certificates).
	CABundle []byte
	// TimeoutSeconds per call, 1 to 30; DefaultTimeoutSeconds when 0.
	TimeoutSeconds int32
	// IncludeKubeSystem lets the webhooks see kube-system. Off by default:
	// an outage of the function must never be able to block the control
	// plane's own namespace.
	IncludeKubeSystem bool
	// ExcludeNamespaces are namespaces the webhooks do not see either:
	// the function's own, when it runs in the cluster it guards, so that an
	// outage cannot keep its pods from being created again.
	ExcludeNamespaces []string
	// PushDown adds to each webhook a matchCondition that skips the call
	// when no binding of its group could act (pushdown.go); it needs
	// Policies, the bundle the groups are of.
	PushDown bool
	Policies *policy.Set
}

// Excluded are the namespaces the webhooks are not sent, sorted:
// kube-system unless included, and ExcludeNamespaces.
func (o Options) Excluded() []string {
	out := slices.Clone(o.ExcludeNamespaces)
	if !o.IncludeKubeSystem {
		out = append(out, "kube-system")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckNamespaces refuses a namespace to exclude that no namespace can be
// named.
func (o Options) CheckNamespaces() error {
	for _, ns := range o.ExcludeNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", ns, errs[0])
		}
	}
	return nil
}

// Check reports what kube-apiserver or render would refuse in o: its URL,
// its cluster name, its timeout, a namespace to exclude that no namespace
// can be named.
func (o Options) Check() error {
	if err := o.CheckNamespaces(); err != nil {
		return err
	}
	if _, err := baseURL(o.URL); err != nil {
		return err
	}
	if o.Cluster != "" && !cluster.ValidName(o.Cluster) {
		return fmt.Errorf("cluster %q: want a DNS label (a-z, 0-9 and -, at most 63)", o.Cluster)
	}
	if o.TimeoutSeconds != 0 && (o.TimeoutSeconds < 1 || o.TimeoutSeconds > 30) {
		return fmt.Errorf("timeout %ds out of range: kube-apiserver accepts 1 to 30 seconds", o.TimeoutSeconds)
	}
	return nil
}

// webhookDomain suffixes every webhook name; kube-apiserver requires names
// with at least three DNS labels.
const webhookDomain = "admitfn.io"

// webhook holds what validating and mutating webhooks share.
type webhook struct {
	name    string
	client  admissionregistrationv1.WebhookClientConfig
	nsSel   *metav1.LabelSelector
	fp      admissionregistrationv1.FailurePolicyType
	timeout int32
	group   *policy.Group
	conds   []admissionregistrationv1.MatchCondition
	report  *Report
}

// webhooks renders the shared part of each group of type t.
func webhooks(groups []*policy.Group, t policy.Type, opts Options) (metav1.ObjectMeta, []webhook, error) {
	base, err := baseURL(opts.URL)
	if err != nil {
		return metav1.ObjectMeta{}, nil, err
	}
	if opts.Cluster != "" {
		if !cluster.ValidName(opts.Cluster) {
			return metav1.ObjectMeta{}, nil, fmt.Errorf("cluster %q: want a DNS label (a-z, 0-9 and -, at most 63)", opts.Cluster)
		}
		base += cluster.PathPrefix + opts.Cluster
	}
	timeout := opts.TimeoutSeconds
	if timeout == 0 {
		timeout = DefaultTimeoutSeconds
	}
	if timeout < 1 || timeout > 30 {
		return metav1.ObjectMeta{}, nil, fmt.Errorf("timeout %ds out of range: kube-apiserver accepts 1 to 30 seconds", timeout)
	}
	name := opts.Name
	if name == "" {
		name = "admitfn"
	}
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "admitfn"}}
	var out []webhook
	for _, g := range groups {
		if g.Type != t {
			continue
		}
		webhookURL := base + g.Path()
		nsSel := g.NamespaceSelector
		if excluded := opts.Excluded(); len(excluded) > 0 {
			nsSel = policy.MergeSelectors(nsSel, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
			}}})
		}
		hook := strings.TrimPrefix(g.Path(), "/") // "validate", "mutate/<id>"
		if prefix, id, ok := strings.Cut(hook, "/"); ok {
			hook = id + "." + prefix
		}
		// Webhook names show in kube-apiserver's errors and metrics: a
		// deployment renamed with -name gets names of its own, so two can
		// share a cluster and be told apart.
		if name != "admitfn" {
			hook += "." + name
		}
		w := webhook{
			name:    hook + "." + webhookDomain,
			client:  admissionregistrationv1.WebhookClientConfig{URL: &webhookURL, CABundle: opts.CABundle},
			nsSel:   nsSel,
			fp:      g.FailurePolicy,
			timeout: timeout,
			group:   g,
		}
		if opts.PushDown {
			if opts.Policies == nil {
				return metav1.ObjectMeta{}, nil, errors.New("push-down needs the bundle's policies")
			}
			rep := PushDown(g, opts.Policies, w.name, opts.Cluster != "")
			w.report = &rep
			w.conds = rep.Conditions
		}
		out = append(out, w)
	}
	return meta, out, nil
}

// Validating renders the ValidatingWebhookConfiguration for the validating
// groups among groups.
func Validating(groups []*policy.Group, opts Options) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	meta, hooks, err := webhooks(groups, policy.Validating, opts)
	if err != nil {
		return nil, err
	}
	return validating(meta, hooks), nil
}

func validating(meta metav1.ObjectMeta, hooks []webhook) *admissionregistrationv1.ValidatingWebhookConfiguration {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: meta,
	}
	for _, h := range hooks {
		mp := admissionregistrationv1.Equivalent
		se := admissionregistrationv1.SideEffectClassNone
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    h.name,
			ClientConfig:            h.client,
			Rules:                   h.group.Rules,
			FailurePolicy:           &h.fp,
			MatchPolicy:             &mp,
			NamespaceSelector:       h.nsSel,
			ObjectSelector:          h.group.ObjectSelector,
			SideEffects:             &se,
			TimeoutSeconds:          &h.timeout,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			MatchConditions:         h.conds,
		})
	}
	return cfg
}

// Mutating renders the MutatingWebhookConfiguration for the mutating groups
// among groups. Each webhook carries its group's reinvocationPolicy: with
// IfNeeded, kube-apiserver calls it again when later mutations changed the
// object, as it reinvokes such policies in-cluster.
func Mutating(groups []*policy.Group, opts Options) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	meta, hooks, err := webhooks(groups, policy.Mutating, opts)
	if err != nil {
		return nil, err
	}
	return mutating(meta, hooks), nil
}

func mutating(meta metav1.ObjectMeta, hooks []webhook) *admissionregistrationv1.MutatingWebhookConfiguration {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: meta,
	}
	for _, h := range hooks {
		mp := admissionregistrationv1.Equivalent
		se := admissionregistrationv1.SideEffectClassNone
		rp := h.group.ReinvocationPolicy
		if rp == "" {
			rp = admissionregistrationv1.NeverReinvocationPolicy
		}
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:                    h.name,
			ClientConfig:            h.client,
			Rules:                   h.group.Rules,
			FailurePolicy:           &h.fp,
			MatchPolicy:             &mp,
			NamespaceSelector:       h.nsSel,
			ObjectSelector:          h.group.ObjectSelector,
			SideEffects:             &se,
			TimeoutSeconds:          &h.timeout,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ReinvocationPolicy:      &rp,
			MatchConditions:         h.conds,
		})
	}
	return cfg
}

// Render renders both configurations of groups and, with opts.PushDown,
// the push-down report of each webhook, in their order: each group's
// push-down computed once.
func Render(groups []*policy.Group, opts Options) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration, []Report, error) {
	vMeta, vHooks, err := webhooks(groups, policy.Validating, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	mMeta, mHooks, err := webhooks(groups, policy.Mutating, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	var reports []Report
	for _, h := range append(vHooks, mHooks...) {
		if h.report != nil {
			reports = append(reports, *h.report)
		}
	}
	return validating(vMeta, vHooks), mutating(mMeta, mHooks), reports, nil
}

// baseURL checks u the way kube-apiserver validates clientConfig.url and
// returns it without a trailing slash.
func baseURL(u string) (string, error) {
	if u == "" {
		return "", errors.New("a URL is required: https://host[:port][/prefix]")
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("invalid URL %q: %w", u, err)
	}
	switch {
	case parsed.Scheme != "https":
		return "", fmt.Errorf("invalid URL %q: kube-apiserver only calls webhooks over https", u)
	case parsed.Host == "":
		return "", fmt.Errorf("invalid URL %q: a host is required", u)
	case parsed.User != nil:
		return "", fmt.Errorf("invalid URL %q: user information is not allowed", u)
	case parsed.RawQuery != "" || parsed.Fragment != "" || strings.Contains(u, "?") || strings.Contains(u, "#"):
		return "", fmt.Errorf("invalid URL %q: query and fragment are not allowed", u)
	}
	return strings.TrimSuffix(u, "/"), nil
}
