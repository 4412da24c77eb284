// Package render builds the ValidatingWebhookConfiguration that makes
// kube-apiserver call admitfn for a bundle: one webhook per policy group,
// each on its group's route.
package render

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/admitfn/admitfn/core/policy"
)

// DefaultTimeoutSeconds leaves kube-apiserver's default (10s) in place: a
// review takes milliseconds, and a serverless cold start fits well inside.
const DefaultTimeoutSeconds = 10

// Options configures the rendered configuration.
type Options struct {
	// Name of the ValidatingWebhookConfiguration; "admitfn" when empty.
	Name string
	// URL is the function's base URL: https://host[:port][/prefix].
	URL string
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
}

// webhookDomain suffixes every webhook name; kube-apiserver requires names
// with at least three DNS labels.
const webhookDomain = "validate.admitfn.io"

// Validating renders the configuration for groups.
func Validating(groups []*policy.Group, opts Options) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	base, err := baseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	timeout := opts.TimeoutSeconds
	if timeout == 0 {
		timeout = DefaultTimeoutSeconds
	}
	if timeout < 1 || timeout > 30 {
		return nil, fmt.Errorf("timeout %ds out of range: kube-apiserver accepts 1 to 30 seconds", timeout)
	}
	name := opts.Name
	if name == "" {
		name = "admitfn"
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "admitfn"}},
	}
	for _, g := range groups {
		webhookURL := base + g.Path()
		nsSel := g.NamespaceSelector
		if !opts.IncludeKubeSystem {
			nsSel = policy.MergeSelectors(nsSel, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"},
			}}})
		}
		fp := g.FailurePolicy
		mp := admissionregistrationv1.Equivalent
		se := admissionregistrationv1.SideEffectClassNone
		t := timeout
		wh := admissionregistrationv1.ValidatingWebhook{
			Name:                    webhookName(g),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &webhookURL, CABundle: opts.CABundle},
			Rules:                   g.Rules,
			FailurePolicy:           &fp,
			MatchPolicy:             &mp,
			NamespaceSelector:       nsSel,
			ObjectSelector:          g.ObjectSelector,
			SideEffects:             &se,
			TimeoutSeconds:          &t,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
		}
		cfg.Webhooks = append(cfg.Webhooks, wh)
	}
	return cfg, nil
}

func webhookName(g *policy.Group) string {
	if g.ID == "" {
		return webhookDomain
	}
	return g.ID + "." + webhookDomain
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
