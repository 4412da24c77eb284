package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// The cluster-access bundle: every policy reads something of the cluster
// that the request does not carry. Bindings are confined to the case's
// namespace, so the policies applied natively touch nothing else.
const clusterAccessBundle = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ns-replicas.cluster.e2e}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  variables:
  - {name: canApprove, expression: "authorizer.group('').resource('configmaps').namespace(object.metadata.namespace).check('approve').allowed()"}
  validations:
  - expression: "namespaceObject.metadata.labels.env != 'prod' || object.spec.replicas >= 2"
    messageExpression: "'namespace ' + namespaceObject.metadata.name + ' of ' + namespaceObject.metadata.annotations.owner + ' needs 2 replicas'"
  - expression: "!variables.canApprove || object.metadata.?labels.approved.orValue('') == 'yes'"
    message: what an approver creates is labelled approved=yes
  auditAnnotations:
  - {key: env, valueExpression: "namespaceObject.metadata.labels.env"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ns-replicas.cluster.e2e}
spec:
  policyName: ns-replicas.cluster.e2e
  validationActions: [Deny, Audit]
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $NS}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: break-glass.cluster.e2e}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  matchConditions:
  - {name: not-an-approver, expression: "!authorizer.group('').resource('configmaps').namespace(object.metadata.namespace).check('approve').allowed()"}
  validations:
  - expression: "object.metadata.?labels.tier.orValue('') != 'critical' || authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('break-glass').allowed()"
    message: critical deployments need the break-glass verb
  - expression: "authorizer.group('apps').resource('deployments').subresource('scale').namespace(object.metadata.namespace).check('update').allowed()"
    message: only users who may scale deployments create them
  - expression: "authorizer.requestResource.check('create').allowed()"
    message: the requester may not create this
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: break-glass.cluster.e2e}
spec:
  policyName: break-glass.cluster.e2e
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $NS}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: cm-max.cluster.e2e}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max + ' replicas (ConfigMap ' + params.metadata.name + ')'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: cm-max.cluster.e2e}
spec:
  policyName: cm-max.cluster.e2e
  validationActions: [Deny]
  paramRef: {name: limits, namespace: $NS-params, parameterNotFoundAction: Deny}
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $NS}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: limit-max.cluster.e2e}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: rules.admitfn.io/v1, kind: Limit}
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.replicas <= params.max"
    messageExpression: "'at most ' + string(params.max) + ' replicas (Limit ' + params.metadata.name + ')'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: limit-max.cluster.e2e}
spec:
  policyName: limit-max.cluster.e2e
  validationActions: [Deny]
  paramRef: {selector: {matchLabels: {applies: "yes"}}, parameterNotFoundAction: Deny}
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $NS}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: absent.cluster.e2e}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "params.data.ok == 'true'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: absent-deny.cluster.e2e}
spec:
  policyName: absent.cluster.e2e
  validationActions: [Deny]
  paramRef: {name: absent, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $NS}}
    objectSelector: {matchLabels: {which: deny}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: absent-allow.cluster.e2e}
spec:
  policyName: absent.cluster.e2e
  validationActions: [Deny]
  paramRef: {name: absent, parameterNotFoundAction: Allow}
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $NS}}
    objectSelector: {matchLabels: {which: allow}}
`

// clusterObjects are a cluster's namespace, params and RBAC for the
// bundle: what differs between clusters.
type clusterObjects struct {
	env, owner string
	cmMax      string
	limits     map[string]int // Limit name → max, all labelled applies=yes
	// sreBreakGlass: the group sre may use the break-glass verb.
	sreBreakGlass bool
}

// The users requests are made as.
var clusterUsers = map[string]rest.ImpersonationConfig{
	"alice": {UserName: "alice", Groups: []string{"e2e-users", "sre"}},
	"bob":   {UserName: "bob", Groups: []string{"e2e-users"}},
	"carol": {UserName: "carol", UID: "carol-uid", Groups: []string{"e2e-users", "approvers"}, Extra: map[string][]string{"example.com/ticket": {"T-1"}}},
}

// TestClusterAccess runs policies that read namespaceObject, call the
// authorizer and take params from the cluster natively and through
// admitfn given read access by docs/cluster-rbac.yaml, and compares; then
// serves a second kube-apiserver from the same process, each from its own
// objects, and tries every way reading a cluster can fail.
func TestClusterAccess(t *testing.T) {
	const ns = "cluster-access"
	a := kube.config
	installLimitCRDOn(t, a)
	objects(t, a, ns, clusterObjects{env: "prod", owner: "team-a", cmMax: "4", limits: map[string]int{"gold": 3, "silver": 10}, sreBreakGlass: true})
	tokenA, forbiddenToken := readerToken(t, a, true), readerToken(t, a, false)

	b, stopB, err := kube.apiserver("kube-apiserver-b", "/registry-b", filepath.Join(kube.dir, "audit-b.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopB)
	installLimitCRDOn(t, b)
	objects(t, b, ns, clusterObjects{env: "dev", owner: "team-b", cmMax: "10", limits: map[string]int{"gold": 10}})
	tokenB := readerToken(t, b, true)

	closed, blackhole := closedPort(t), blackholeListener(t)
	clusters := filepath.Join(t.TempDir(), "clusters.yaml")
	caA, caB := filepath.Join(kube.dir, "kube-apiserver-certs", "apiserver.crt"), filepath.Join(kube.dir, "kube-apiserver-b-certs", "apiserver.crt")
	bogus := writeFile(t, "not-a-token")
	writeFileAt(t, clusters, fmt.Sprintf(`clusters:
- {name: a, server: %[1]q, certificateAuthority: %[2]q, tokenFile: %[3]q, namespaceTTL: 2s, paramTTL: 2s, authorizerTTL: 2s}
- {name: b, server: %[4]q, certificateAuthority: %[5]q, tokenFile: %[6]q}
- {name: down, server: "https://%[7]s", certificateAuthority: %[2]q, tokenFile: %[3]q}
- {name: revoked, server: %[1]q, certificateAuthority: %[2]q, tokenFile: %[8]q}
- {name: forbidden, server: %[1]q, certificateAuthority: %[2]q, tokenFile: %[9]q}
- {name: slow, server: "https://%[10]s", certificateAuthority: %[2]q, tokenFile: %[3]q, maxInFlight: 1}
`, a.Host, caA, tokenA, b.Host, caB, tokenB, closed, bogus, forbiddenToken, blackhole))

	// Natively, in cluster a.
	r := newParityRunnerOn(t, a)
	r.users = clusterUsers
	requests := []parityRequest{
		{verb: "create", object: deploy("web1", 1, "nginx"), as: "bob"},
		{verb: "create", object: deploy("web2", 2, "nginx"), as: "bob"},
		{verb: "create", object: deploy("web3", 4, "nginx"), as: "bob"},
		{verb: "create", object: deploy("web4", 2, "nginx", "tier", "critical"), as: "bob"},
		{verb: "create", object: deploy("web5", 2, "nginx", "tier", "critical"), as: "alice"},
		{verb: "create", object: deploy("web6", 2, "nginx", "tier", "critical"), as: "carol"},
		{verb: "create", object: deploy("web9", 2, "nginx", "tier", "critical", "approved", "yes"), as: "carol"},
		{verb: "create", object: cm("cm-deny", nil, "which", "deny"), as: "bob"},
		{verb: "create", object: cm("cm-allow", nil, "which", "allow"), as: "bob"},
	}
	c := parityCase{name: "cluster-access", bundle: clusterAccessBundle, requests: requests}
	cs := clientFor(t, a)
	wait := func(active bool) { waitSentinel(t, cs, "cluster-access", active) }
	_, policies := r.applyNative(clusterAccessBundle, ns, sentinel("cluster-access"), wait)
	t.Cleanup(func() { r.removeNative(nil, policies, wait) })
	r.warmParams(requests[1].object, ns, false)
	native := r.play(c, ns, false)
	r.removeNative(nil, policies, wait)
	r.cleanup()
	wantNative := []string{
		"namespace cluster-access of team-a needs 2 replicas",
		"",
		"at most 3 replicas (Limit gold)",
		"critical deployments need the break-glass verb",
		"",
		"what an approver creates is labelled approved=yes",
		"",
		"no params found for policy binding with `Deny` parameterNotFoundAction",
		"",
	}
	for i, o := range native {
		if (o.Message == "") != (wantNative[i] == "") || !strings.Contains(o.Message, wantNative[i]) {
			t.Errorf("native request %d: %q, want it to say %q", i, o.Message, wantNative[i])
		}
	}
	if got := native[1].Annotations["ns-replicas.cluster.e2e/env"]; got != `"prod"` && got != "prod" {
		t.Errorf("native: the env annotation is %q, want prod", got)
	}

	// Through admitfn: the bundle without params, read from the cluster.
	files := map[string]string{"bundle.yaml": strings.ReplaceAll(clusterAccessBundle, "$NS", ns)}
	fn, dir, uninstall := startAdmitfnOn(t, a, viaServer, files, "cluster-access", nil, []string{"--clusters", clusters}, "--cluster", "a")
	viaAdmitfn := r.play(c, ns, true)
	r.cleanup()
	compareOutcomes(t, requests, native, viaAdmitfn, "", "", func(o observed) string { return o.Message })

	// What changes in the cluster is read within the staleness configured
	// (2s): once it has passed, the next review sees it.
	cs.CoreV1().Namespaces().Patch(context.Background(), ns, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"env":"dev"}}}`), metav1.PatchOptions{})
	cs.CoreV1().ConfigMaps(ns+"-params").Patch(context.Background(), "limits", "application/merge-patch+json", []byte(`{"data":{"max":"1"}}`), metav1.PatchOptions{})
	time.Sleep(2 * time.Second)
	if o := r.play(parityCase{requests: []parityRequest{{verb: "dryrun", object: deploy("web7", 1, "nginx"), as: "bob"}, {verb: "dryrun", object: deploy("web8", 2, "nginx"), as: "bob"}}}, ns, true); !o[0].Allowed || o[1].Message != "ValidatingAdmissionPolicy 'cm-max.cluster.e2e' with binding 'cm-max.cluster.e2e' denied request: at most 1 replicas (ConfigMap limits)" {
		t.Errorf("after the label and the param changed: %s", dumpJSON(o))
	}
	uninstall()

	// The same process serves cluster b on b's URLs, from b's objects: its
	// namespace is dev, its limits higher, and alice may not break glass
	// there.
	cfgB := kube.render(t, dir, "https://"+fn.addr, "cluster-access-b", "--cluster", "b")
	csB := clientFor(t, b)
	if _, err := csB.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), cfgB.validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSentinel(t, csB, "cluster-access", true)
	rb := newParityRunnerOn(t, b)
	rb.users = clusterUsers
	requestsB := []parityRequest{
		{verb: "dryrun", object: deploy("web1", 1, "nginx"), as: "bob"},
		{verb: "dryrun", object: deploy("web3", 8, "nginx"), as: "bob"},
		{verb: "dryrun", object: deploy("web5", 2, "nginx", "tier", "critical"), as: "alice"},
	}
	var group string // the route of the bindings of Deployments
	for _, w := range cfgB.validating.Webhooks {
		if len(w.Rules) > 0 && slices.Contains(w.Rules[0].Resources, "deployments") {
			group = (*w.ClientConfig.URL)[strings.LastIndex(*w.ClientConfig.URL, "/validate/"):]
			wantB := []string{"", "", `admission webhook "` + w.Name + `" denied the request: ValidatingAdmissionPolicy 'break-glass.cluster.e2e' with binding 'break-glass.cluster.e2e' denied request: critical deployments need the break-glass verb`}
			inB := rb.playQuiet(requestsB, ns)
			for i, got := range inB {
				if got != wantB[i] {
					t.Errorf("cluster b request %d: %q, want %q", i, got, wantB[i])
				}
			}
		}
	}
	if group == "" {
		t.Fatalf("no webhook of the bundle's bindings in %+v", cfgB.validating.Webhooks)
	}
	if !strings.Contains(fn.Logs(), `"cluster":"b"`) || !strings.Contains(fn.Logs(), `"cluster":"a"`) {
		t.Errorf("review lines do not name the clusters:\n%s", fn.Logs())
	}

	// A cluster the process does not serve: 404, and neither cluster is
	// read.
	direct := directClient(t)
	readsA, readsB := readerEvents(t, kube.auditLog), readerEvents(t, filepath.Join(kube.dir, "audit-b.log"))
	if code, body := postReview(t, direct, fn.addr, "/clusters/nowhere"+group, ns); code != http.StatusNotFound || !strings.Contains(body, `"message":"not found"`) {
		t.Errorf("unknown cluster: HTTP %d %s", code, body)
	}
	time.Sleep(time.Second) // audit events of a read would have landed
	if a2, b2 := readerEvents(t, kube.auditLog), readerEvents(t, filepath.Join(kube.dir, "audit-b.log")); a2 != readsA || b2 != readsB {
		t.Errorf("a request for an unknown cluster read a cluster: reader events a %d→%d, b %d→%d", readsA, a2, readsB, b2)
	}

	// Faults: each answered by the policy's failurePolicy (Fail) with a
	// message that says what could not be read, and counted.
	deny := func(what string) string {
		return "ValidatingAdmissionPolicy 'ns-replicas.cluster.e2e' with binding 'ns-replicas.cluster.e2e' denied request: namespaceObject: cannot read namespace " + what
	}
	for _, f := range []struct {
		path, namespace string
		want            *regexp.Regexp
	}{
		// What the policy author needs, never the API URL, the function's
		// identity or the server's answer (those go to the log).
		{"/clusters/down" + group, ns, regexp.MustCompile("^" + regexp.QuoteMeta(deny(`"cluster-access" from cluster "down": cluster unavailable: the cluster could not be reached`)) + "$")},
		{"/clusters/revoked" + group, ns, regexp.MustCompile("^" + regexp.QuoteMeta(deny(`"cluster-access" from cluster "revoked": cluster unavailable: the cluster refused the function's credentials (401)`)) + "$")},
		{"/clusters/forbidden" + group, ns, regexp.MustCompile("^" + regexp.QuoteMeta(deny(`"cluster-access" from cluster "forbidden": cluster unavailable: the function's credentials may not read this (403)`)) + "$")},
		{"/clusters/a" + group, "gone", regexp.MustCompile("^" + regexp.QuoteMeta(deny(`"gone" from cluster "a": namespaces "gone" not found`)) + "$")},
	} {
		code, body := postReview(t, direct, fn.addr, f.path, f.namespace)
		var out struct {
			Response struct {
				Allowed bool
				Status  struct{ Message string }
			}
		}
		json.Unmarshal([]byte(body), &out)
		if code != http.StatusOK || out.Response.Allowed || !f.want.MatchString(out.Response.Status.Message) {
			t.Errorf("%s: HTTP %d %s\nwant a denial matching %s", f.path, code, body, f.want)
		}
	}
	if !strings.Contains(fn.Logs(), `"cluster":"forbidden","read":"namespace cluster-access","error":"namespaces \"cluster-access\" is forbidden: User \"system:serviceaccount:admitfn:admitfn-unbound\"`) {
		t.Errorf("the log lacks the forbidden read's detail:\n%s", fn.Logs())
	}
	// A slow cluster holds a review no longer than its deadline (the
	// webhook's failurePolicy decides the 504); a second review, which
	// waits for the reads already in flight rather than making its own,
	// no longer than its own.
	for _, namespace := range []string{ns, "other"} {
		if code, body := postReview(t, direct, fn.addr, "/clusters/slow"+group+"?timeout=2s", namespace); code != http.StatusGatewayTimeout || !strings.Contains(body, "did not finish before the deadline") {
			t.Errorf("slow cluster, namespace %s: HTTP %d %s, want 504 (the review's deadline passed)", namespace, code, body)
		}
	}
	metrics := get(t, direct, "https://"+fn.addr+"/metrics")
	for _, want := range []string{
		`admitfn_cluster_read_errors_total{cluster="down"} `,
		`admitfn_cluster_read_errors_total{cluster="revoked"} `,
		`admitfn_cluster_read_errors_total{cluster="forbidden"} `,
		`admitfn_cluster_read_errors_total{cluster="slow"} `,
		`admitfn_cluster_reviews_total{cluster="b",decision="allowed"} `,
		`admitfn_cluster_reviews_total{cluster="a",decision="denied"} `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(metrics, `admitfn_cluster_read_errors_total{cluster="a"}`) || strings.Contains(metrics, `admitfn_cluster_read_errors_total{cluster="b"}`) {
		t.Errorf("reads of the clusters that answer are counted as errors:\n%s", metrics)
	}
	fleetAudit(t, dir, ns, a, b)

	if strings.Contains(fn.Logs(), "nowhere") || strings.Contains(fn.Logs(), "not-a-token") {
		t.Errorf("the logs hold a caller's cluster name or a credential:\n%s", fn.Logs())
	}
	for _, tok := range []string{tokenA, tokenB} {
		data, _ := os.ReadFile(tok)
		if strings.Contains(fn.Logs(), strings.TrimSpace(string(data))) || strings.Contains(metrics, strings.TrimSpace(string(data))) {
			t.Error("a token reached the logs or the metrics")
		}
	}
	lateArrivals(t, direct, fn, group, ns, clusters, a)
}

// objects creates what the bundle reads in the cluster config reaches: the
// namespace ns (and ns-params for the ConfigMap), the params and the RBAC.
func objects(t *testing.T, config *rest.Config, ns string, o clusterObjects) {
	t.Helper()
	ctx := context.Background()
	cs := clientFor(t, config)
	for name, labels := range map[string]map[string]string{ns: {"env": o.env}, ns + "-params": nil} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"owner": o.owner}}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cmap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: ns + "-params"}, Data: map[string]string{"max": o.cmMax}}
	if _, err := cs.CoreV1().ConfigMaps(ns+"-params").Create(ctx, cmap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := newParityRunnerOn(t, config)
	for name, max := range o.limits {
		u := r.decode(limit(name, max, "applies", "yes"), ns)[0]
		ri, _ := r.resource(u)
		if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	other := r.decode(limit("ignored", 0, "applies", "no"), ns)[0]
	ri, _ := r.resource(other)
	if _, err := ri.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roles := []rbacv1.ClusterRole{
		// The built-in edit role is aggregated by a controller the suite
		// does not run: what the users need, spelled out.
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-users"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-break-glass"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"break-glass"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-approve"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"approve"}}}},
	}
	bindings := []rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-users"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-users"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "e2e-users"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-approve"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-approve"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "approvers"}}},
	}
	if o.sreBreakGlass {
		bindings = append(bindings, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-break-glass"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-break-glass"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "sre"}}})
	}
	for _, role := range roles {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, b := range bindings {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// readerToken returns the file of a token of a service account bound to
// docs/cluster-rbac.yaml's ClusterRole, with the rule for the Limit param
// kind added as the file says to (bound false: bound to nothing).
func readerToken(t *testing.T, config *rest.Config, bound bool) string {
	t.Helper()
	ctx := context.Background()
	cs := clientFor(t, config)
	name := "admitfn-reader"
	if !bound {
		name = "admitfn-unbound"
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "admitfn"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Tests that each need a reader share it.
	if _, err := cs.CoreV1().ServiceAccounts("admitfn").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if bound {
		raw, err := os.ReadFile("../../docs/cluster-rbac.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(raw, &role); err != nil {
			t.Fatal(err)
		}
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"rules.admitfn.io"}, Resources: []string{"limits"}, Verbs: []string{"get", "list", "watch"}},
			// lateArrivals' kind, whose CRD is created after the function starts.
			rbacv1.PolicyRule{APIGroups: []string{"late.admitfn.io"}, Resources: []string{"quotas"}, Verbs: []string{"get", "list", "watch"}})
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "admitfn"}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tok, err := cs.CoreV1().ServiceAccounts("admitfn").CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, tok.Status.Token)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

func writeFileAt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// blackholeListener accepts connections and never answers.
func blackholeListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// directClient calls the function over HTTPS as kube-apiserver would.
func directClient(t *testing.T) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kube.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: patience}
}

// postReview sends the review of a Deployment create in namespace.
func postReview(t *testing.T, client *http.Client, addr, path, namespace string) (int, string) {
	t.Helper()
	return postReviewAs(t, client, addr, path, namespace, `{"username":"bob","groups":["e2e-users"]}`)
}

// postReviewAs posts postReview's Deployment as userInfo (JSON).
func postReviewAs(t *testing.T, client *http.Client, addr, path, namespace, userInfo string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"operation":"CREATE","namespace":%q,"name":"web","userInfo":%s,"object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":%q},"spec":{"replicas":1}}}}`, namespace, userInfo, namespace)
	return post(t, client, "https://"+addr+path, body)
}

func post(t *testing.T, client *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out)
}

// readerEvents counts the audit events of the function's service account.
func readerEvents(t *testing.T, auditLog string) int {
	t.Helper()
	data, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), `"username":"system:serviceaccount:admitfn:admitfn-reader"`)
}

// playQuiet makes requests (dry runs) and returns each one's error message,
// "" when allowed.
func (r *parityRunner) playQuiet(requests []parityRequest, ns string) []string {
	r.t.Helper()
	var out []string
	for _, req := range requests {
		u := r.decode(req.object, ns)[0]
		u.SetNamespace(ns)
		_, gvr := r.resource(u)
		_, err := r.as(req.as).Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		msg := ""
		if err != nil {
			msg = err.Error()
			if se, ok := err.(*apierrors.StatusError); ok {
				msg = nativePrefix.ReplaceAllString(se.ErrStatus.Message, "")
			}
		}
		out = append(out, msg)
	}
	return out
}

// fleetAudit audits both clusters in one run of admitfn apply --cluster,
// each from its own namespaces, authorizer and params: a Deployment in
// each, the same object, decided differently.
func fleetAudit(t *testing.T, bundleDir, ns string, a, b *rest.Config) {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	for name, cfg := range map[string]*rest.Config{"a": a, "b": b} {
		obj := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns, Labels: map[string]string{"tier": "critical"}},
			Spec: appsv1.DeploymentSpec{Replicas: ptrInt32(3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fleet"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}},
		}
		// As the admin, past the webhooks of b: what the audit finds.
		cs := clientFor(t, cfg)
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), "cluster-access-b", metav1.DeleteOptions{})
		waitFor(func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		kubeconfig.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
		kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
		kubeconfig.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: ns}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kube.cliBin, "apply", "-p", bundleDir, "--cluster", "--kubeconfig", path, "--context", "a", "--context", "b", "--as", "bob", "--as-group", "e2e-users", "-o", "json").Output()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
		t.Fatalf("admitfn apply: %v\n%s", err, out)
	}
	var reports []struct {
		Cluster string
		Report  struct {
			Resources []struct {
				Resource struct{ Kind, Name string }
				Decision string
				Results  []struct{ Policy, Result, Message string }
			}
		}
	}
	if err := json.Unmarshal(out, &reports); err != nil || len(reports) != 2 {
		t.Fatalf("admitfn apply -o json: %v\n%s", err, out)
	}
	failed := map[string][]string{}
	for _, r := range reports {
		for _, res := range r.Report.Resources {
			if res.Resource.Name != "fleet" {
				continue
			}
			for _, v := range res.Results {
				if v.Result == "fail" {
					failed[r.Cluster] = append(failed[r.Cluster], v.Policy+": "+v.Message)
				}
			}
		}
	}
	// a: its ConfigMap says at most 1 (changed above), and bob may not
	// break glass; b: its limits are 10, and nobody may.
	want := map[string][]string{
		"a": {"break-glass.cluster.e2e: critical deployments need the break-glass verb", "cm-max.cluster.e2e: at most 1 replicas (ConfigMap limits)"},
		"b": {"break-glass.cluster.e2e: critical deployments need the break-glass verb"},
	}
	if !reflect.DeepEqual(failed, want) || reports[0].Cluster != "a" || reports[1].Cluster != "b" {
		t.Errorf("fleet audit: failed %v\nwant %v\n%s", failed, want, out)
	}
}

func ptrInt32(v int32) *int32 { return &v }

// reviewAnswer decodes an AdmissionReview answer.
func reviewAnswer(t *testing.T, code int, body string) (allowed bool, message string) {
	t.Helper()
	var out struct {
		Response struct {
			Allowed bool
			Status  struct{ Message string }
		}
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("HTTP %d %s, want a review's answer", code, body)
	}
	return out.Response.Allowed, out.Response.Status.Message
}

// lateArrivals: what a forged review, or the order things are created in,
// could make the function get wrong about a cluster (issue 65's findings).
func lateArrivals(t *testing.T, direct *http.Client, fn *admitfn, group, ns, clusters string, a *rest.Config) {
	t.Helper()
	ctx := context.Background()
	cs := clientFor(t, a)
	answer := func(code int, body string) (bool, string) {
		t.Helper()
		return reviewAnswer(t, code, body)
	}

	// A review names a namespace before it exists (a forged one, or a
	// request racing its namespace's creation): not found. Created, the
	// next review reads it, as kube-apiserver reads a namespace its
	// informer has not seen yet, instead of the cached "not found".
	_, msg := answer(postReview(t, direct, fn.addr, "/clusters/a"+group, "late-ns"))
	if !strings.Contains(msg, `namespaceObject: cannot read namespace "late-ns" from cluster "a": namespaces "late-ns" not found`) {
		t.Errorf("a namespace that does not exist yet: %q", msg)
	}
	late := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late-ns", Labels: map[string]string{"env": "dev"}, Annotations: map[string]string{"owner": "team-c"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), "late-ns", metav1.DeleteOptions{}) })
	if _, msg := answer(postReview(t, direct, fn.addr, "/clusters/a"+group, "late-ns")); strings.Contains(msg, "cannot read namespace") {
		t.Errorf("the namespace, created right after a review missed it: %q", msg)
	}

	// A userInfo larger than any identity kube-apiserver reads is not
	// relayed to the cluster's authorizer.
	sars := func() int {
		data, err := os.ReadFile(kube.auditLog)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), `"resource":"subjectaccessreviews"`)
	}
	answer(postReview(t, direct, fn.addr, "/clusters/a"+group, ns))
	if sars() == 0 {
		t.Fatal("the authorizer's reads are not audited")
	}
	time.Sleep(time.Second) // the audit events of the review before land
	before := sars()
	huge := fmt.Sprintf(`{"username":"bob","groups":["e2e-users",%q,%q]}`, strings.Repeat("g", 600<<10), strings.Repeat("h", 600<<10))
	// The authorizer's error makes check() not allowed, as upstream's CEL
	// library has it: bob, who may scale deployments, is refused as if he
	// could not.
	_, msg = answer(postReviewAs(t, direct, fn.addr, "/clusters/a"+group, ns, huge))
	if want := "ValidatingAdmissionPolicy 'break-glass.cluster.e2e' with binding 'break-glass.cluster.e2e' denied request: only users who may scale deployments create them"; msg != want {
		t.Errorf("an oversized userInfo: %q, want %q", msg, want)
	}
	time.Sleep(time.Second)
	if after := sars(); after != before {
		t.Errorf("an oversized userInfo made %d SubjectAccessReviews", after-before)
	}

	// A param kind whose CRD is created after the function started is
	// found once it is served (discovery is read again, at most every
	// 10s, when a kind is not found).
	dir := t.TempDir()
	writeFileAt(t, filepath.Join(dir, "quota.yaml"), strings.ReplaceAll(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: quota.cluster.e2e}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: late.admitfn.io/v1, kind: Quota}
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.replicas <= params.max"
    messageExpression: "'at most ' + string(params.max) + ' replicas (Quota ' + params.metadata.name + ')'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: quota.cluster.e2e}
spec:
  policyName: quota.cluster.e2e
  validationActions: [Deny]
  paramRef: {name: q, namespace: $NS-params, parameterNotFoundAction: Deny}
`, "$NS", ns))
	srv := kube.serve(t, dir, "", "--clusters", clusters)
	readyz := get(t, direct, "https://"+srv.addr+"/readyz")
	route := regexp.MustCompile(`routes: (/validate/[0-9a-f]+)`).FindStringSubmatch(readyz)
	if route == nil {
		t.Fatalf("no route in /readyz:\n%s", readyz)
	}
	_, msg = answer(postReview(t, direct, srv.addr, "/clusters/a"+route[1], ns))
	if want := "cannot tell whether Quota params are namespaced in cluster \"a\": cluster unavailable: the cluster serves no kind late.admitfn.io/v1, Kind=Quota"; !strings.Contains(msg, want) {
		t.Errorf("before the CRD: %q, want it to say %q", msg, want)
	}
	installCRDOn(t, a, "late.admitfn.io", "quotas", "Quota")
	q := newParityRunnerOn(t, a)
	u := q.decode("apiVersion: late.admitfn.io/v1\nkind: Quota\nmetadata: {name: q, namespace: "+ns+"-params}\nmax: 0\n", "")[0]
	qi, _ := q.resource(u)
	quota, err := qi.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Quota q: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, msg = answer(postReview(t, direct, srv.addr, "/clusters/a"+route[1], ns))
		if strings.Contains(msg, "at most 0 replicas (Quota q)") || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if want := "ValidatingAdmissionPolicy 'quota.cluster.e2e' with binding 'quota.cluster.e2e' denied request: at most 0 replicas (Quota q)"; msg != want || quota == nil {
		t.Errorf("after the CRD: %q, want %q", msg, want)
	}
}
