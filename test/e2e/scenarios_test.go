package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/admitfn/admitfn/core/policy/slowpolicy"
	"github.com/admitfn/admitfn/test/doccheck"
)

func deploymentObj(name string, replicas int32, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.0"}}},
			},
		},
	}
}

// webhookPrefix is what kube-apiserver puts before a webhook's denial.
var webhookPrefix = regexp.MustCompile(`^admission webhook "([a-z0-9.-]+)" denied the request: `)

// stripWebhook returns the policy's own message and the webhook's name.
func stripWebhook(t *testing.T, o outcome) (outcome, string) {
	t.Helper()
	m := webhookPrefix.FindStringSubmatch(o.message)
	if o.allowed || m == nil {
		return o, ""
	}
	o.message = strings.TrimPrefix(o.message, m[0])
	return o, m[1]
}

const replicasPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas.e2e.admitfn.io}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments, deployments/scale]}
  validations:
  - expression: "object.spec.replicas <= 3"
    messageExpression: "'replicas must be at most 3, got ' + string(object.spec.replicas)"
    reason: Forbidden
  auditAnnotations:
  - {key: replicas, valueExpression: "string(object.spec.replicas)"}
`

func binding(name, policy, actions, extra string) string {
	return fmt.Sprintf("---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: %s}\nspec:\n  policyName: %s\n  validationActions: %s\n%s", name, policy, actions, extra)
}

// TestValidationActions runs on every front: the server and the Lambda
// function answer kube-apiserver alike.
func TestValidationActions(t *testing.T) { eachFront(t, validationActions) }

func validationActions(t *testing.T, via front) {
	files := map[string]string{"policy.yaml": replicasPolicy +
		binding("deny", "replicas.e2e.admitfn.io", "[Deny]", "  matchResources: {objectSelector: {matchLabels: {mode: deny}}}\n") +
		binding("warn", "replicas.e2e.admitfn.io", "[Warn]", "  matchResources: {objectSelector: {matchLabels: {mode: warn}}}\n") +
		binding("audit", "replicas.e2e.admitfn.io", "[Audit]", "  matchResources: {objectSelector: {matchLabels: {mode: audit}}}\n") +
		binding("warn-audit", "replicas.e2e.admitfn.io", "[Warn, Audit]", "  matchResources: {objectSelector: {matchLabels: {mode: warn-audit}}}\n") +
		// The Scale object kube-apiserver builds has no labels, so scale
		// requests are bound by resource, not by an object selector.
		binding("scale", "replicas.e2e.admitfn.io", "[Deny]", "  matchResources: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments/scale]}]}\n"),
	}
	a, _ := deployAdmitfnVia(t, via, files)
	ns := "e2e-actions-" + string(via)
	namespace(t, ns, nil)
	cs, w := kube.client(t)
	create := func(mode string, replicas int32) outcome {
		_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), deploymentObj(mode, replicas, map[string]string{"mode": mode}), metav1.CreateOptions{})
		return result(err, w)
	}

	got, webhook := stripWebhook(t, create("deny", 5))
	expect(t, "Deny", got, outcome{code: 403, message: "ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'deny' denied request: replicas must be at most 3, got 5"})
	// The webhooks are named after the configuration (render --name).
	if !strings.HasSuffix(webhook, ".validate."+k8sName(t)+".admitfn.io") {
		t.Errorf("denied by webhook %q", webhook)
	}
	if !a.reviewed(via, "denied") {
		t.Errorf("no denial logged by the %s front:\n%s", via, a.Logs())
	}
	expect(t, "Deny, passing", create("deny", 2), outcome{allowed: true})
	auditDeny := kube.auditAnnotations(t, "create", "deployments", ns, "deny")
	if auditDeny[webhook+"/replicas.e2e.admitfn.io_replicas"] != "2" {
		t.Errorf("audit annotations of the admitted create: %v", auditDeny)
	}

	expect(t, "Warn", create("warn", 5), outcome{allowed: true, warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'warn': replicas must be at most 3, got 5"}})

	expect(t, "Audit", create("audit", 5), outcome{allowed: true})
	annotations := kube.auditAnnotations(t, "create", "deployments", ns, "audit")
	var failures []map[string]any
	for k, v := range annotations {
		if strings.HasSuffix(k, "/validation_failure") {
			json.Unmarshal([]byte(v), &failures)
		}
	}
	if len(failures) != 1 || failures[0]["message"] != "replicas must be at most 3, got 5" || failures[0]["binding"] != "audit" ||
		failures[0]["policy"] != "replicas.e2e.admitfn.io" || failures[0]["expressionIndex"] != float64(0) {
		t.Errorf("Audit: audit annotations %v", annotations)
	}

	expect(t, "Warn+Audit", create("warn-audit", 4), outcome{allowed: true, warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'warn-audit': replicas must be at most 3, got 4"}})
	annotations = kube.auditAnnotations(t, "create", "deployments", ns, "warn-audit")
	found := false
	for k, v := range annotations {
		if strings.HasSuffix(k, "/validation_failure") && strings.Contains(v, `"validationActions":["Warn","Audit"]`) {
			found = true
		}
	}
	if !found {
		t.Errorf("Warn+Audit: audit annotations %v", annotations)
	}

	// Server-side dry run is reviewed like the real thing.
	_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), deploymentObj("dry", 9, map[string]string{"mode": "deny"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	got, _ = stripWebhook(t, result(err, w))
	expect(t, "dry run", got, outcome{code: 403, message: "ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'deny' denied request: replicas must be at most 3, got 9"})

	// The scale subresource: UPDATE of deployments/scale, object a Scale.
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(context.Background(), "deny",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: ns, Labels: map[string]string{"mode": "deny"}}, Spec: autoscalingv1.ScaleSpec{Replicas: 7}}, metav1.UpdateOptions{})
	got, _ = stripWebhook(t, result(err, w))
	expect(t, "deployments/scale", got, outcome{code: 403, message: "ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'scale' denied request: replicas must be at most 3, got 7"})
}

func TestParamsAndNamespaceGroups(t *testing.T) {
	files := map[string]string{"policy.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: limit.e2e.admitfn.io}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max + ' replicas (' + params.metadata.name + ')'"
` + binding("test-by-name", "limit.e2e.admitfn.io", "[Deny]", "  paramRef: {name: test-limit, namespace: e2e-params, parameterNotFoundAction: Deny}\n  matchResources: {namespaceSelector: {matchLabels: {env: test}}}\n") +
		binding("prod-by-selector", "limit.e2e.admitfn.io", "[Deny]", "  paramRef: {namespace: e2e-params, selector: {matchLabels: {tier: prod}}, parameterNotFoundAction: Deny}\n  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}\n") +
		binding("own-namespace", "limit.e2e.admitfn.io", "[Deny]", "  paramRef: {name: local-limit, parameterNotFoundAction: Deny}\n  matchResources: {namespaceSelector: {matchLabels: {env: local}}}\n") +
		binding("optional", "limit.e2e.admitfn.io", "[Deny]", "  paramRef: {name: local-limit, parameterNotFoundAction: Allow}\n  matchResources: {namespaceSelector: {matchLabels: {env: optional}}}\n"),
		"params.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: test-limit, namespace: e2e-params}
data: {max: "2"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prod-limit, namespace: e2e-params, labels: {tier: prod}}
data: {max: "10"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prod-floor, namespace: e2e-params, labels: {tier: prod}}
data: {max: "8"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-limit, namespace: e2e-local}
data: {max: "1"}
`}
	deployAdmitfn(t, files)
	namespace(t, "e2e-team", map[string]string{"env": "test"})
	namespace(t, "e2e-local", map[string]string{"env": "local"})
	namespace(t, "e2e-elsewhere", map[string]string{"env": "local"})
	namespace(t, "e2e-optional", map[string]string{"env": "optional"})
	cs, w := kube.client(t)
	create := func(ns, name string, replicas int32) outcome {
		_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), deploymentObj(name, replicas, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		o, _ := stripWebhook(t, result(err, w))
		return o
	}
	const prefix = "ValidatingAdmissionPolicy 'limit.e2e.admitfn.io' with binding "
	expect(t, "param by name", create("e2e-team", "a", 3), outcome{code: 422, message: prefix + "'test-by-name' denied request: at most 2 replicas (test-limit)"})
	expect(t, "param by name, passing", create("e2e-team", "a", 2), outcome{allowed: true})

	// Relabel the namespace: kube-apiserver now routes it to the prod group.
	namespace(t, "e2e-team", map[string]string{"env": "prod"})
	expectSoon(t, "relabelled to prod: 3 passes", func() outcome { return create("e2e-team", "a", 3) }, outcome{allowed: true})
	expect(t, "params by selector: every param must pass", create("e2e-team", "a", 9), outcome{code: 422, message: prefix + "'prod-by-selector' denied request: at most 8 replicas (prod-floor)"})
	namespace(t, "e2e-team", map[string]string{"env": "none"})
	expectSoon(t, "no binding for the namespace", func() outcome { return create("e2e-team", "a", 100) }, outcome{allowed: true})

	expect(t, "param in the request namespace", create("e2e-local", "a", 2), outcome{code: 422, message: prefix + "'own-namespace' denied request: at most 1 replicas (local-limit)"})
	expect(t, "parameterNotFoundAction Deny", create("e2e-elsewhere", "a", 1), outcome{code: 422, message: prefix + "'own-namespace' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"})
	expect(t, "parameterNotFoundAction Allow", create("e2e-optional", "a", 50), outcome{allowed: true})
}

func TestMatching(t *testing.T) {
	files := map[string]string{"policy.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: protect.e2e.admitfn.io}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE, DELETE], resources: [configmaps]}
    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [configmaps], resourceNames: [exempt]}
  matchConditions:
  - {name: not-admin-group, expression: "!('e2e:admins' in request.userInfo.groups)"}
  validations:
  - expression: "request.operation != 'DELETE'"
    messageExpression: "'protected ' + oldObject.metadata.name + ' cannot be deleted'"
  - expression: "object == null || !has(object.data) || !('forbidden' in object.data)"
    message: "the key 'forbidden' is not allowed"
` + binding("protect", "protect.e2e.admitfn.io", "[Deny]", "  matchResources: {objectSelector: {matchLabels: {protected: \"yes\"}}}\n")}
	deployAdmitfn(t, files)
	namespace(t, "e2e-match", nil)
	cs, w := kube.client(t)
	ctx := context.Background()
	cm := func(name string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}
	}
	strip := func(err error) outcome { o, _ := stripWebhook(t, result(err, w)); return o }
	prot := map[string]string{"protected": "yes"}
	const prefix = "ValidatingAdmissionPolicy 'protect.e2e.admitfn.io' with binding 'protect' denied request: "

	_, err := cs.CoreV1().ConfigMaps("e2e-match").Create(ctx, cm("guarded", prot, map[string]string{"forbidden": "x"}), metav1.CreateOptions{})
	expect(t, "objectSelector matches", strip(err), outcome{code: 422, message: prefix + "the key 'forbidden' is not allowed"})
	_, err = cs.CoreV1().ConfigMaps("e2e-match").Create(ctx, cm("plain", nil, map[string]string{"forbidden": "x"}), metav1.CreateOptions{})
	expect(t, "objectSelector does not match", strip(err), outcome{allowed: true})
	_, err = cs.CoreV1().ConfigMaps("e2e-match").Create(ctx, cm("exempt", prot, map[string]string{"forbidden": "x"}), metav1.CreateOptions{})
	expect(t, "excludeResourceRules", strip(err), outcome{allowed: true})
	_, err = cs.CoreV1().ConfigMaps("e2e-match").Create(ctx, cm("guarded", prot, map[string]string{"ok": "x"}), metav1.CreateOptions{})
	expect(t, "create guarded", strip(err), outcome{allowed: true})

	// DELETE: object is null, oldObject is the stored object, and the
	// objectSelector is checked against it.
	err = cs.CoreV1().ConfigMaps("e2e-match").Delete(ctx, "guarded", metav1.DeleteOptions{})
	expect(t, "DELETE", strip(err), outcome{code: 422, message: prefix + "protected guarded cannot be deleted"})

	// matchConditions: the admin group skips the policy.
	admin := impersonate(t, "alice", "system:masters", "e2e:admins")
	err = admin.CoreV1().ConfigMaps("e2e-match").Delete(ctx, "guarded", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Errorf("matchConditions: admin delete: %v", err)
	}
}

func TestFailurePolicyWhenTheFunctionIsDown(t *testing.T) {
	files := map[string]string{"policy.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: fail.e2e.admitfn.io}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ignore.e2e.admitfn.io}
spec:
  failurePolicy: Ignore
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [services]}]}
  validations: [{expression: "true"}]
` + binding("fail", "fail.e2e.admitfn.io", "[Deny]", "") + binding("ignore", "ignore.e2e.admitfn.io", "[Deny]", "")}
	a, dir := deployAdmitfn(t, files)
	// The webhook of the Fail group (the fail binding's, and the
	// sentinel's), by the name render gives it.
	failHook := ""
	for _, w := range kube.render(t, dir, "https://"+a.addr, k8sName(t)).validating.Webhooks {
		if *w.FailurePolicy == admissionregistrationv1.Fail {
			failHook = w.Name
		}
	}
	namespace(t, "e2e-down", nil)
	cs, w := kube.client(t)
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	createCM := func() outcome {
		_, err := cs.CoreV1().ConfigMaps("e2e-down").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return result(err, w)
	}
	createSvc := func() outcome {
		_, err := cs.CoreV1().Services("e2e-down").Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return result(err, w)
	}
	expect(t, "up: Fail group", createCM(), outcome{allowed: true})

	a.stop()
	got := createCM()
	// kube-apiserver may still hold a keep-alive connection to the stopped
	// function: its first write then fails with a broken pipe or reset
	// rather than a refused connection. Each is the function being down.
	down := regexp.MustCompile(`connection refused|broken pipe|connection reset by peer|EOF`)
	if got.allowed || got.code != 500 || !strings.Contains(got.message, `failed calling webhook "`+failHook+`"`) || !down.MatchString(got.message) {
		t.Errorf("down, failurePolicy Fail: %+v", got)
	}
	expect(t, "down, failurePolicy Ignore", createSvc(), outcome{allowed: true})
}

func TestTimeoutFollowsFailurePolicy(t *testing.T) {
	// A listener that accepts and never answers stands in for a function
	// that hangs; the configuration is admitfn's own rendering.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	name := k8sName(t)
	dir := writeBundle(t, map[string]string{"p.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: hang-fail.e2e.admitfn.io}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}
  matchConditions: [{name: mine, expression: "object.metadata.name.startsWith('hang-')"}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: hang-ignore.e2e.admitfn.io}
spec:
  failurePolicy: Ignore
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [services]}]}
  validations: [{expression: "true"}]
` + binding("hang-fail", "hang-fail.e2e.admitfn.io", "[Deny]", "  matchResources: {objectSelector: {matchLabels: {e2e: hang}}}\n") + binding("hang-ignore", "hang-ignore.e2e.admitfn.io", "[Deny]", "  matchResources: {objectSelector: {matchLabels: {e2e: hang}}}\n")})
	cfg := kube.render(t, dir, "https://"+l.Addr().String(), name, "--timeout", "2")
	kube.install(t, cfg.validating)
	namespace(t, "e2e-hang", nil)
	cs, w := kube.client(t)
	ctx := context.Background()
	labels := map[string]string{"e2e": "hang"}
	var got outcome
	// The configuration takes a moment to reach the apiserver's cache.
	waitFor(func() error {
		_, err := cs.CoreV1().ConfigMaps("e2e-hang").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hang-cm", Labels: labels}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		got = result(err, w)
		if got.allowed {
			return fmt.Errorf("not yet active")
		}
		return nil
	})
	if got.allowed || !strings.Contains(got.message, "failed calling webhook") || !strings.Contains(got.message, "context deadline exceeded") {
		t.Errorf("timeout, failurePolicy Fail: %+v", got)
	}
	_, err = cs.CoreV1().Services("e2e-hang").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: labels}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	expect(t, "timeout, failurePolicy Ignore", result(err, w), outcome{allowed: true})
}

func TestRouteUnknownToTheBundle(t *testing.T) {
	// The configuration names a group the served bundle doesn't have: admitfn
	// answers 404 and kube-apiserver applies the webhook's failurePolicy.
	old := writeBundle(t, map[string]string{"p.yaml": replicasPolicy + binding("scoped", "replicas.e2e.admitfn.io", "[Deny]", "  matchResources: {namespaceSelector: {matchLabels: {drift: \"yes\"}}}\n")})
	a, _ := deployAdmitfn(t, map[string]string{"p.yaml": replicasPolicy + binding("everywhere", "replicas.e2e.admitfn.io", "[Deny]", "")})
	name := k8sName(t) + "-old"
	kube.install(t, kube.render(t, old, "https://"+a.addr, name).validating)
	namespace(t, "e2e-drift", map[string]string{"drift": "yes"})
	cs, w := kube.client(t)
	var got outcome
	waitFor(func() error {
		_, err := cs.AppsV1().Deployments("e2e-drift").Create(context.Background(), deploymentObj("d", 1, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		got = result(err, w)
		if got.allowed {
			return fmt.Errorf("not yet active")
		}
		return nil
	})
	if got.allowed || got.code != 500 || !strings.Contains(got.message, "failed calling webhook") || !strings.Contains(got.message, "in the current bundle: re-render the webhook configuration") {
		t.Errorf("unknown route: %+v", got)
	}
	if !strings.Contains(a.Logs(), "configuration drift") {
		t.Errorf("drift not logged:\n%s", a.Logs())
	}
}

func TestV1beta1Reviews(t *testing.T) { eachFront(t, v1beta1Reviews) }

func v1beta1Reviews(t *testing.T, via front) {
	a, _, _ := startAdmitfnVia(t, via, map[string]string{"p.yaml": replicasPolicy + binding("deny", "replicas.e2e.admitfn.io", "[Deny]", "")}, k8sName(t),
		func(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].AdmissionReviewVersions = []string{"v1beta1"}
			}
		})
	cs, w := kube.client(t)
	ns := "e2e-v1beta1-" + string(via)
	namespace(t, ns, nil)
	_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), deploymentObj("d", 4, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	got, _ := stripWebhook(t, result(err, w))
	expect(t, "v1beta1", got, outcome{code: 403, message: "ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'deny' denied request: replicas must be at most 3, got 4"})
	if !a.reviewed(via, "denied") {
		t.Errorf("admitfn logs:\n%s", a.Logs())
	}
}

// CONNECT: kube-apiserver reviews pods/exec with a PodExecOptions object
// before it tries to reach the pod's node (none runs here, so an admitted
// exec then fails for want of a node, not of admission).
func TestConnect(t *testing.T) {
	deployAdmitfn(t, map[string]string{"p.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-shells.e2e.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec]}]
  validations:
  - expression: "!object.command.exists(c, c in ['sh', 'bash'])"
    messageExpression: "'no shells in ' + request.name + ' (' + request.kind.kind + ')'"
    reason: Forbidden
` + binding("no-shells", "no-shells.e2e.admitfn.io", "[Deny]", "")})
	namespace(t, "e2e-connect", nil)
	cs, w := kube.client(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts("e2e-connect").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
	if _, err := cs.CoreV1().Pods("e2e-connect").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	exec := func(command string) outcome {
		err := cs.CoreV1().RESTClient().Post().Namespace("e2e-connect").Resource("pods").Name("web").SubResource("exec").
			Param("container", "web").Param("command", command).Param("stdout", "true").Do(ctx).Error()
		return result(err, w)
	}
	got, _ := stripWebhook(t, exec("sh"))
	expect(t, "exec sh", got, outcome{code: 403, message: "ValidatingAdmissionPolicy 'no-shells.e2e.admitfn.io' with binding 'no-shells' denied request: no shells in web (PodExecOptions)"})
	if got := exec("date"); got.allowed || strings.Contains(got.message, "admission webhook") || !strings.Contains(got.message, "does not have a host assigned") {
		t.Errorf("exec date should pass admission and fail on the missing node: %+v", got)
	}
}

func TestSlowReviewAnswersBeforeTheApiserverGivesUp(t *testing.T) {
	// A review that would run for about 10s on a webhook with
	// timeoutSeconds: 4. The function stops at its deadline (?timeout= less
	// its 400ms margin) and answers a 504 Status, which kube-apiserver reports
	// under the webhook's failurePolicy (Fail): its own timeout, "context
	// deadline exceeded", never fires.
	deployAdmitfn(t, map[string]string{"slow.yaml": slowpolicy.Bundle()}, "--timeout", "4")
	namespace(t, "e2e-slow", nil)
	cs, w := kube.client(t)
	start := time.Now()
	_, err := cs.CoreV1().ConfigMaps("e2e-slow").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: slowpolicy.Name}, Data: slowpolicy.Data()}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	got := result(err, w)
	if got.allowed || got.code != 500 || !strings.Contains(got.message, `failed calling webhook`) ||
		!strings.Contains(got.message, "did not finish before the deadline") || strings.Contains(got.message, "context deadline exceeded") {
		t.Errorf("slow review: %+v", got)
	}
	t.Logf("kube-apiserver answered after %v: %s", time.Since(start), got.message)
	// Other ConfigMaps pass: the bundle matches only this name.
	_, err = cs.CoreV1().ConfigMaps("e2e-slow").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quick"}, Data: slowpolicy.Data()}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	expect(t, "other ConfigMap", result(err, w), outcome{allowed: true})
}

// kube-apiserver authenticates to the function with the kubeconfig
// docs/security.md shows (the harness hands it to the admission plugins):
// reviews carry the bearer token the server's --auth-tokens-file holds, and
// a request without it is refused.
func TestWebhookAuthenticatesWithABearerToken(t *testing.T) {
	doccheck.Find(t, "docs/security.md", 2) // what the harness gave kube-apiserver
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# kube-apiserver's, from its AdmissionConfiguration\n"+kube.authToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bundle := writeBundle(t, map[string]string{"p.yaml": replicasPolicy + binding("everywhere", "replicas.e2e.admitfn.io", "[Deny]", "")})
	a := kube.serve(t, bundle, kube.authAddr, "--auth-tokens-file", tokens)
	cfg := kube.render(t, bundle, "https://"+a.addr, k8sName(t)).validating
	kube.install(t, cfg)
	namespace(t, "e2e-auth", nil)
	cs, w := kube.client(t)
	var got outcome
	waitFor(func() error {
		_, err := cs.AppsV1().Deployments("e2e-auth").Create(context.Background(), deploymentObj("d", 5, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if got = result(err, w); got.allowed {
			return fmt.Errorf("not yet active")
		}
		return nil
	})
	want := `admission webhook "` + cfg.Webhooks[0].Name + `" denied the request: ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'everywhere' denied request: replicas must be at most 3, got 5`
	if got.allowed || got.code != 403 || got.message != want {
		t.Errorf("with the token: %+v, want 403 %q\n%s", got, want, a.Logs())
	}

	// The same review without the token.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kube.caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	resp, err := client.Post("https://"+a.addr+"/validate", "application/json", strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: HTTP %d, want 401", resp.StatusCode)
	}
}
