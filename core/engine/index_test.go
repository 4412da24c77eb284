package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// indexRules are resource rules of every shape upstream's matcher knows:
// wildcards, subresource patterns, scopes, names, exclusions, versions.
var indexRules = map[string]string{
	"pods-create":      `resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]`,
	"pods-any":         `resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: [pods]}]`,
	"pods-subs":        `resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: ["pods/*"]}]`,
	"pods-exec":        `resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec]}]`,
	"any-scale":        `resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: [UPDATE], resources: ["*/scale"]}]`,
	"apps-all":         `resourceRules: [{apiGroups: [apps], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]`,
	"everything":       `resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"]}]`,
	"namespaced":       `resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"], scope: Namespaced}]`,
	"cluster":          `resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"], scope: Cluster}]`,
	"named-configmap":  `resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [configmaps], resourceNames: [special]}]`,
	"all-but-pods":     `resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}], excludeResourceRules: [{apiGroups: [""], apiVersions: ["*"], operations: ["*"], resources: [pods]}]`,
	"deploy-v1beta1":   `resourceRules: [{apiGroups: [apps], apiVersions: [v1beta1], operations: ["*"], resources: [deployments]}]`,
	"widgets-delete":   `resourceRules: [{apiGroups: [example.com], apiVersions: [v1], operations: [DELETE], resources: [widgets]}]`,
	"namespaces-write": `resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [namespaces]}]`,
	"two-rules":        `resourceRules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}, {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [services]}]`,
}

// indexBundle has a policy per rule, each denying whatever it matches with
// its own name as the message, so the failed policies of a review are
// exactly the policies that matched, in bundle order.
func indexBundle(t *testing.T) *Engine {
	t.Helper()
	names := make([]string, 0, len(indexRules))
	for n := range indexRules {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %s}
spec:
  failurePolicy: Fail
  matchConstraints: {%s}
  validations: [{expression: "false", message: %s}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %s}
spec: {policyName: %s, validationActions: [Warn]}
---
`, n, indexRules[n], n, n, n)
	}
	return mustEngine(t, policy.Source{Name: "index.yaml", Data: []byte(b.String())})
}

// The index only narrows what the dispatcher is given: for every shape of
// request, the policies that apply are those upstream's dispatcher finds
// scanning every hook, in the same order, and the index does leave most
// policies out.
func TestIndexAppliesWhatTheDispatcherWould(t *testing.T) {
	e := indexBundle(t)
	r := e.routes[validateRoute]
	for _, c := range []struct {
		name string
		opts reqOpts
		want []string
	}{
		{"pod create", reqOpts{operation: "CREATE", version: "v1", resource: "pods", kind: "Pod", name: "p", namespace: "ns"},
			// Upstream's "pods/*" matches the pod itself too: "*" matches
			// any subresource, the empty one included.
			[]string{"everything", "namespaced", "pods-any", "pods-create", "pods-subs"}},
		{"pod delete", reqOpts{operation: "DELETE", version: "v1", resource: "pods", kind: "Pod", name: "p", namespace: "ns"},
			[]string{"everything", "namespaced", "pods-any", "pods-subs"}},
		{"pod exec", reqOpts{operation: "CONNECT", version: "v1", resource: "pods", subResource: "exec", kind: "PodExecOptions", name: "p", namespace: "ns"},
			[]string{"everything", "pods-exec", "pods-subs"}},
		{"deployment scale", reqOpts{operation: "UPDATE", group: "apps", version: "v1", resource: "deployments", subResource: "scale", kindGroup: "autoscaling", kind: "Scale", name: "d", namespace: "ns"},
			[]string{"any-scale", "everything"}},
		{"deployment v1", reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "d", namespace: "ns"},
			[]string{"all-but-pods", "apps-all", "everything", "namespaced"}},
		{"deployment v1beta1", reqOpts{operation: "CREATE", group: "apps", version: "v1beta1", resource: "deployments", kind: "Deployment", name: "d", namespace: "ns"},
			[]string{"all-but-pods", "apps-all", "deploy-v1beta1", "everything", "namespaced"}},
		{"special configmap", reqOpts{operation: "UPDATE", version: "v1", resource: "configmaps", kind: "ConfigMap", name: "special", namespace: "ns"},
			[]string{"all-but-pods", "everything", "named-configmap", "namespaced"}},
		{"other configmap", reqOpts{operation: "UPDATE", version: "v1", resource: "configmaps", kind: "ConfigMap", name: "other", namespace: "ns"},
			[]string{"all-but-pods", "everything", "namespaced"}},
		{"namespace create", reqOpts{operation: "CREATE", version: "v1", resource: "namespaces", kind: "Namespace", name: "ns", namespace: "ns"},
			[]string{"all-but-pods", "cluster", "everything", "namespaces-write"}},
		{"node update", reqOpts{operation: "UPDATE", version: "v1", resource: "nodes", kind: "Node", name: "n1"},
			[]string{"all-but-pods", "cluster", "everything"}},
		{"widget delete", reqOpts{operation: "DELETE", group: "example.com", version: "v1", resource: "widgets", kind: "Widget", name: "w", namespace: "ns"},
			[]string{"all-but-pods", "everything", "namespaced", "widgets-delete"}},
		{"service delete", reqOpts{operation: "DELETE", version: "v1", resource: "services", kind: "Service", name: "s", namespace: "ns"},
			[]string{"all-but-pods", "everything", "namespaced", "two-rules"}},
		{"job create", reqOpts{operation: "CREATE", group: "batch", version: "v1", resource: "jobs", kind: "Job", name: "j", namespace: "ns"},
			[]string{"all-but-pods", "everything", "namespaced", "two-rules"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := review.Decode(admissionReview(t, c.opts))
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Review(context.Background(), validateRoute, req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.FailedPolicies, c.want) {
				t.Errorf("indexed review: policies %v, want %v", res.FailedPolicies, c.want)
			}
			full, err := e.dispatcher.Dispatch(context.Background(), celeval.NewAttributes(req), r.validating.hooks)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(full.FailedPolicies, res.FailedPolicies) {
				t.Errorf("scanning every hook: policies %v, indexed %v", full.FailedPolicies, res.FailedPolicies)
			}
			if n := len(r.validating.candidates(celeval.NewAttributes(req))); n >= len(indexRules) {
				t.Errorf("%d candidates of %d policies: the index left nothing out", n, len(indexRules))
			}
		})
	}
}
