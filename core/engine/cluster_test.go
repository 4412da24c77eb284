package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/cluster/clustertest"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

const clusterPolicies = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: env-label}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "namespaceObject.metadata.labels['env'] != 'prod' || object.spec.replicas >= 2"
    messageExpression: "'prod namespace ' + namespaceObject.metadata.name + ' needs 2 replicas'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: env-label}
spec: {policyName: env-label, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: break-glass}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "object.metadata.?labels.tier.orValue('') != 'critical' || authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('break-glass').allowed()"
    message: critical deployments need the break-glass verb
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: break-glass}
spec: {policyName: break-glass, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max + ' replicas'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas}
spec:
  policyName: max-replicas
  validationActions: [Deny]
  paramRef: {name: limits, namespace: admitfn, parameterNotFoundAction: Deny}
`

func configMap(namespace, name, max string, labels map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": namespace}
	if labels != nil {
		meta["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]any{"max": max}}}
}

func testCluster() *clustertest.Cluster {
	return &clustertest.Cluster{Static: cluster.Static{
		ClusterName: "prod-eu",
		Namespaces: map[string]*corev1.Namespace{
			"shop": {ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}},
			"dev":  {ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"env": "dev"}}},
		},
		Objects:    []*unstructured.Unstructured{configMap("admitfn", "limits", "5", nil)},
		Namespaced: map[schema.GroupVersionKind]bool{{Version: "v1", Kind: "ConfigMap"}: true},
		Allow: func(a authorizer.Attributes) bool {
			return a.GetVerb() == "break-glass" && slices.Contains(a.GetUser().GetGroups(), "sre")
		},
	}}
}

func TestReviewReadsItsCluster(t *testing.T) {
	e := mustEngine(t, policy.Source{Name: "cluster.yaml", Data: []byte(clusterPolicies)})
	rt := policy.Route{Type: policy.Validating}
	type want struct {
		allowed bool
		message string
	}
	cases := []struct {
		name      string
		namespace string
		replicas  int64
		tier      string
		groups    []string
		cluster   func(*clustertest.Cluster)
		noCluster bool
		want      want
	}{
		{name: "prod label read from the cluster", namespace: "shop", replicas: 1, want: want{false, "ValidatingAdmissionPolicy 'env-label' with binding 'env-label' denied request: prod namespace shop needs 2 replicas"}},
		{name: "dev label", namespace: "dev", replicas: 1, want: want{true, ""}},
		{name: "param from the cluster", namespace: "dev", replicas: 6, want: want{false, "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: at most 5 replicas"}},
		{name: "param missing in the cluster", namespace: "dev", replicas: 1, cluster: func(c *clustertest.Cluster) { c.Objects = nil },
			want: want{false, "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"}},
		{name: "break-glass allowed for sre", namespace: "dev", replicas: 1, tier: "critical", groups: []string{"system:authenticated", "sre"}, want: want{true, ""}},
		{name: "break-glass denied to others", namespace: "dev", replicas: 1, tier: "critical", want: want{false, "ValidatingAdmissionPolicy 'break-glass' with binding 'break-glass' denied request: critical deployments need the break-glass verb"}},
		{name: "cluster unreachable", namespace: "dev", replicas: 1, tier: "critical", cluster: func(c *clustertest.Cluster) { c.Err = errors.New("dial tcp 10.0.0.1:443: connection refused") },
			want: want{false, `ValidatingAdmissionPolicy 'env-label' with binding 'env-label' denied request: namespaceObject: cannot read namespace "dev" from cluster "prod-eu": dial tcp 10.0.0.1:443: connection refused`}},
		{name: "namespace deleted", namespace: "gone", replicas: 1,
			want: want{false, `ValidatingAdmissionPolicy 'env-label' with binding 'env-label' denied request: namespaceObject: cannot read namespace "gone" from cluster "prod-eu": namespaces "gone" not found`}},
		{name: "without a cluster: names only, no authorizer", noCluster: true, namespace: "shop", replicas: 1, tier: "critical", groups: []string{"sre"},
			want: want{false, "ValidatingAdmissionPolicy 'env-label' with binding 'env-label' denied request: expression 'namespaceObject.metadata.labels['env'] != 'prod' || object.spec.replicas >= 2' resulted in error: no such key: labels"}},
		{name: "without a cluster: no authorizer", noCluster: true, namespace: "shop", replicas: 2, tier: "critical", groups: []string{"sre"},
			want: want{false, "ValidatingAdmissionPolicy 'break-glass' with binding 'break-glass' denied request: expression 'object.metadata.?labels.tier.orValue('') != 'critical' || authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('break-glass').allowed()' resulted in error: no such attribute(s): authorizer"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster()
			if tc.cluster != nil {
				tc.cluster(c)
			}
			labels := map[string]any{}
			if tc.tier != "" {
				labels["tier"] = tc.tier
			}
			d := deployment("web", tc.namespace, tc.replicas, labels)
			body := admissionReview(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: tc.namespace, object: d, groups: tc.groups})
			req, err := review.Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if !tc.noCluster {
				ctx = cluster.NewContext(ctx, c)
			}
			res, err := e.Review(ctx, rt, req)
			if err != nil {
				t.Fatal(err)
			}
			got := want{allowed: res.Response.Allowed}
			if res.Response.Result != nil {
				got.message = res.Response.Result.Message
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestAuthorizerIsAskedAsTheRequestingUser(t *testing.T) {
	e := mustEngine(t, policy.Source{Name: "cluster.yaml", Data: []byte(clusterPolicies)})
	c := testCluster()
	d := deployment("web", "dev", 1, map[string]any{"tier": "critical"})
	body := admissionReview(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "dev", object: d,
		username: "bob", groups: []string{"sre", "system:authenticated"}})
	req, err := review.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	req.UserInfo.UID = "u-1"
	req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{"scopes.example.com": {"a", "b"}}
	if _, err := e.Review(cluster.NewContext(context.Background(), c), policy.Route{Type: policy.Validating}, req); err != nil {
		t.Fatal(err)
	}
	if len(c.Asked) != 1 {
		t.Fatalf("asked %d times, want once", len(c.Asked))
	}
	a := c.Asked[0]
	u := a.GetUser()
	got := []any{u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra(), a.GetVerb(), a.GetAPIGroup(), a.GetResource(), a.GetNamespace(), a.IsResourceRequest()}
	want := []any{"bob", "u-1", []string{"sre", "system:authenticated"}, map[string][]string{"scopes.example.com": {"a", "b"}}, "break-glass", "apps", "deployments", "dev", true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("asked %v\nwant %v", got, want)
	}
}

func TestUnreadableClusterFollowsFailurePolicy(t *testing.T) {
	ignoring := strings.ReplaceAll(clusterPolicies, "failurePolicy: Fail", "failurePolicy: Ignore")
	e := mustEngine(t, policy.Source{Name: "cluster.yaml", Data: []byte(ignoring)})
	c := testCluster()
	c.Err = errors.New("the server has asked for the client to provide credentials")
	for _, tc := range []struct {
		tier    string
		allowed bool
		message string
		failed  []string
	}{
		// The namespace and the param cannot be read: Ignore.
		{"", true, "", []string{"env-label"}},
		// An authorizer that errs is upstream's check() that is not
		// allowed (its error() says why): the expression decides.
		{"critical", false, "ValidatingAdmissionPolicy 'break-glass' with binding 'break-glass' denied request: critical deployments need the break-glass verb", []string{"env-label", "break-glass"}},
	} {
		d := deployment("web", "shop", 9, map[string]any{"tier": tc.tier})
		body := admissionReview(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "shop", object: d})
		req, err := review.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Review(cluster.NewContext(context.Background(), c), e.Groups()[0].Route(), req)
		if err != nil {
			t.Fatal(err)
		}
		message := ""
		if res.Response.Result != nil {
			message = res.Response.Result.Message
		}
		if res.Response.Allowed != tc.allowed || message != tc.message || !reflect.DeepEqual(res.FailedPolicies, tc.failed) {
			t.Errorf("tier %q: allowed %v %q, failed %v\nwant %v %q, failed %v", tc.tier, res.Response.Allowed, message, res.FailedPolicies, tc.allowed, tc.message, tc.failed)
		}
	}
}

const clusterMutation = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: env-from-namespace}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions:
  - name: not-exempt
    expression: "!authorizer.group('').resource('configmaps').check('exempt').allowed()"
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/labels", value: {"env": namespaceObject.metadata.labels["env"]}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: env-from-namespace}
spec: {policyName: env-from-namespace}
`

func TestMutationReadsItsCluster(t *testing.T) {
	e := mustEngine(t, policy.Source{Name: "mutate.yaml", Data: []byte(clusterMutation)})
	for _, tc := range []struct {
		name, user string
		err        error
		patch      string
		message    string
	}{
		{name: "label from the namespace", user: "alice", patch: `[{"value":{"env":"prod"},"op":"add","path":"/metadata/labels"}]`},
		{name: "exempt user: matchConditions asked the authorizer", user: "root"},
		{name: "cluster unreachable", user: "alice", err: errors.New("i/o timeout"),
			message: `policy 'env-from-namespace' with binding 'env-from-namespace' denied request: namespaceObject: cannot read namespace "shop" from cluster "prod-eu": i/o timeout`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster()
			c.Allow = func(a authorizer.Attributes) bool { return a.GetVerb() == "exempt" && a.GetUser().GetName() == "root" }
			c.Err = tc.err
			cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cfg", "namespace": "shop"}}
			body := admissionReview(t, reqOpts{operation: "CREATE", version: "v1", resource: "configmaps", kind: "ConfigMap", name: "cfg", namespace: "shop", object: cm, username: tc.user})
			req, err := review.Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Review(cluster.NewContext(context.Background(), c), policy.Route{Type: policy.Mutating}, req)
			if err != nil {
				t.Fatal(err)
			}
			message := ""
			if res.Response.Result != nil {
				message = res.Response.Result.Message
			}
			if string(res.Response.Patch) != tc.patch || message != tc.message || res.Response.Allowed != (tc.message == "") {
				t.Errorf("patch %s, allowed %v %q\nwant %s, %q", res.Response.Patch, res.Response.Allowed, message, tc.patch, tc.message)
			}
		})
	}
}

// An authorizer check costs what upstream charges for it (350,000): two fit
// in an expression's limit, a third does not.
func TestAuthorizerChecksAreCharged(t *testing.T) {
	policy3 := func(checks int) string {
		expr := "false"
		for i := range checks {
			expr += fmt.Sprintf(" || authorizer.group('').resource('pods').check('verb%d').allowed()", i)
		}
		return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: checks}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: %q
    message: no check allowed it
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: checks}
spec: {policyName: checks, validationActions: [Deny]}
`, expr)
	}
	for checks, want := range map[int]string{
		2: "ValidatingAdmissionPolicy 'checks' with binding 'checks' denied request: no check allowed it",
		3: "ValidatingAdmissionPolicy 'checks' with binding 'checks' denied request: expression '",
	} {
		e := mustEngine(t, policy.Source{Name: "checks.yaml", Data: []byte(policy3(checks))})
		c := testCluster()
		d := deployment("web", "dev", 1, nil)
		req, err := review.Decode(admissionReview(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "dev", object: d}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Review(cluster.NewContext(context.Background(), c), policy.Route{Type: policy.Validating}, req)
		if err != nil {
			t.Fatal(err)
		}
		msg := res.Response.Result.Message
		if !strings.HasPrefix(msg, want) || (checks == 3) != strings.HasSuffix(msg, "operation cancelled: actual cost limit exceeded") {
			t.Errorf("%d checks: %q, want it to start %q (and exceed the cost limit with 3)", checks, msg, want)
		}
		if len(c.Asked) != checks {
			// As upstream: a call's cost is charged once it returns.
			t.Errorf("%d checks: the cluster was asked %d times", checks, len(c.Asked))
		}
	}
}

// Params the bundle carries win over the cluster's: what was reviewed and
// signed is what is enforced.
func TestBundleParamsWinOverTheCluster(t *testing.T) {
	bundled := clusterPolicies + `---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: admitfn}
data: {max: "1"}
`
	e := mustEngine(t, policy.Source{Name: "cluster.yaml", Data: []byte(bundled)})
	c := testCluster() // its ConfigMap says 5
	d := deployment("web", "dev", 3, nil)
	req, err := review.Decode(admissionReview(t, reqOpts{operation: "CREATE", group: "apps", version: "v1", resource: "deployments", kind: "Deployment", name: "web", namespace: "dev", object: d}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Review(cluster.NewContext(context.Background(), c), policy.Route{Type: policy.Validating}, req)
	if err != nil {
		t.Fatal(err)
	}
	if want := "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: at most 1 replicas"; res.Response.Allowed || res.Response.Result.Message != want {
		t.Errorf("got %+v, want %q", res.Response.Result, want)
	}
}
