package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// The audit's bundle: deployments in team=audit-shop namespaces need two
// replicas (Deny), and configmaps there should not hold a password (Warn).
const auditPolicies = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas.audit.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations:
  - {expression: object.spec.replicas >= 2, message: at least 2 replicas}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-shop}
spec:
  policyName: replicas.audit.admitfn.io
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {team: audit-shop}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-password.audit.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}]
  validations:
  - {expression: "!has(object.data) || !('password' in object.data)", message: no passwords in configmaps}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-password-shop}
spec:
  policyName: no-password.audit.admitfn.io
  validationActions: [Warn]
  matchResources: {namespaceSelector: {matchLabels: {team: audit-shop}}}
`

// admitfn apply --cluster audits what is already there, with the RBAC
// docs/audit-rbac.yaml grants, reports exactly what each object would
// meet, writes the reports back, and agrees with the deployed webhook.
func TestApplyClusterAudit(t *testing.T) {
	ctx := context.Background()
	cs, _ := kube.client(t)
	namespace(t, "audit-shop", map[string]string{"team": "audit-shop"})
	namespace(t, "audit-other", nil)
	for ns, objs := range map[string][]struct {
		name     string
		replicas int32
	}{"audit-shop": {{"web", 1}, {"api", 3}}, "audit-other": {{"solo", 1}}} {
		for _, o := range objs {
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deploymentObj(o.name, o.replicas, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cs.CoreV1().ConfigMaps("audit-shop").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bundle := writeBundle(t, map[string]string{"p.yaml": auditPolicies})
	kubeconfig := auditKubeconfig(t)

	audit := func(args ...string) (int, string, string) {
		cmd := exec.Command(kube.cliBin, append([]string{"apply", "-p", bundle, "--cluster", "--kubeconfig", kubeconfig}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}

	// The table, for one namespace: exit 1, a denial.
	code, out, errOut := audit("-n", "audit-shop")
	want := `DECISION  RESOURCE                    OPERATION  SOURCE
DENIED    Deployment audit-shop/web   UPDATE
  fail  replicas.audit.admitfn.io replicas-shop/validations[0]: at least 2 replicas
ALLOWED   Deployment audit-shop/api   UPDATE
  pass  1 validation
ALLOWED   ConfigMap audit-shop/creds  UPDATE
  warn  no-password.audit.admitfn.io no-password-shop/validations[0]: no passwords in configmaps
`
	if code != 1 || !sameLines(out, want) {
		t.Errorf("apply --cluster -n audit-shop: exit %d, stderr %q\n%s\nwant (in any order, then the summary)\n%s", code, errOut, out, want)
	}

	// Every namespace, as JSON: the other namespace's deployment is
	// reviewed by no binding (its namespace is not labelled).
	code, out, errOut = audit("-A", "-o", "json", "--audit")
	var report struct {
		Resources []struct {
			Resource                     struct{ Kind, Namespace, Name string }
			Operation, Decision, Message string
			Results                      []struct{ Policy, Binding, Result string }
		}
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("apply --cluster -A: exit %d %v\n%s\n%s", code, err, errOut, out)
	}
	var got []string
	for _, r := range report.Resources {
		if !strings.HasPrefix(r.Resource.Namespace, "audit-") {
			continue // other tests' objects
		}
		line := fmt.Sprintf("%s %s/%s %s %s", r.Resource.Kind, r.Resource.Namespace, r.Resource.Name, r.Operation, r.Decision)
		for _, rr := range r.Results {
			line += fmt.Sprintf(" [%s %s %s]", rr.Policy, rr.Binding, rr.Result)
		}
		got = append(got, line)
	}
	slices.Sort(got)
	wantJSON := []string{
		"ConfigMap audit-shop/creds UPDATE allowed [no-password.audit.admitfn.io no-password-shop warn]",
		"Deployment audit-other/solo UPDATE allowed",
		"Deployment audit-shop/api UPDATE allowed [replicas.audit.admitfn.io replicas-shop pass]",
		"Deployment audit-shop/web UPDATE denied [replicas.audit.admitfn.io replicas-shop fail]",
	}
	if !slices.Equal(got, wantJSON) {
		t.Errorf("apply --cluster -A -o json:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantJSON, "\n"))
	}

	// namespaceObject is the namespace as the cluster holds it.
	labelled := writeBundle(t, map[string]string{"p.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: team.audit.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}]
  validations:
  - {expression: "namespaceObject.metadata.labels.team == 'audit-shop'", message: not the shop}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: team}
spec: {policyName: team.audit.admitfn.io, validationActions: [Audit]}
`})
	cmd := exec.Command(kube.cliBin, "apply", "-p", labelled, "--cluster", "--kubeconfig", kubeconfig, "-n", "audit-shop")
	if out, err := cmd.CombinedOutput(); err != nil || strings.Count(string(out), "  pass  1 validation\n") != 2 {
		t.Errorf("namespaceObject's labels: %v\n%s", err, out)
	}

	// --write-reports puts the PolicyReport in the namespace.
	installPolicyReportCRDs(t)
	if code, _, errOut := audit("-n", "audit-shop", "--audit", "--write-reports"); code != 0 {
		t.Fatalf("--write-reports: exit %d %s", code, errOut)
	}
	dyn, err := dynamic.NewForConfig(kube.config)
	if err != nil {
		t.Fatal(err)
	}
	written, err := dyn.Resource(schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}).Namespace("audit-shop").Get(ctx, "admitfn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	summary, _, _ := unstructured.NestedMap(written.Object, "summary")
	if want := map[string]any{"pass": int64(1), "fail": int64(1), "warn": int64(1), "error": int64(0), "skip": int64(0)}; fmt.Sprint(summary) != fmt.Sprint(want) {
		t.Errorf("written report's summary %v, want %v", summary, want)
	}

	// A bundle that no longer matches the namespace leaves it no results:
	// its stale report is removed.
	quiet := writeBundle(t, map[string]string{"p.yaml": strings.ReplaceAll(auditPolicies, "team: audit-shop", "team: nobody")})
	cmd = exec.Command(kube.cliBin, "apply", "-p", quiet, "--cluster", "--kubeconfig", kubeconfig, "-n", "audit-shop", "--write-reports")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("--write-reports with no results: %v\n%s", err, out)
	}
	reports := dyn.Resource(schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}).Namespace("audit-shop")
	if _, err := reports.Get(ctx, "admitfn", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stale report: %v, want it deleted", err)
	}
	if labels := written.GetLabels(); labels["app.kubernetes.io/managed-by"] != "admitfn" || labels["admitfn.io/deployment"] != "admitfn" {
		t.Errorf("written report's labels %v", labels)
	}

	// A report of that name that is not admitfn's (another tool's, or one
	// made by hand) is neither replaced nor deleted.
	foreign := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
		"metadata": map[string]any{"name": "admitfn", "namespace": "audit-shop", "labels": map[string]any{"app.kubernetes.io/managed-by": "someone-else"}},
		"results":  []any{},
	}}
	foreign, err = reports.Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const notOurs = "admitfn apply: the report audit-shop/admitfn is not this deployment's (it lacks the labels app.kubernetes.io/managed-by=admitfn and admitfn.io/deployment=admitfn): not replacing or deleting it; name this deployment's reports with --deployment\n"
	for _, b := range []string{bundle, quiet} {
		cmd := exec.Command(kube.cliBin, "apply", "-p", b, "--cluster", "--kubeconfig", kubeconfig, "-n", "audit-shop", "--audit", "--write-reports")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Run(); err == nil || errOut.String() != notOurs {
			t.Errorf("--write-reports over another's report: %v %q, want %q", err, errOut.String(), notOurs)
		}
		if got, err := reports.Get(ctx, "admitfn", metav1.GetOptions{}); err != nil || got.GetUID() != foreign.GetUID() || got.GetResourceVersion() != foreign.GetResourceVersion() {
			t.Errorf("another's report was touched: %v %v", got, err)
		}
	}

	// Two deployments auditing one cluster keep their own reports: the
	// staging bundle's, named staging, beside the default one's.
	if err := reports.Delete(ctx, "admitfn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := audit("-n", "audit-shop", "--audit", "--write-reports"); code != 0 {
		t.Fatalf("--write-reports: exit %d %s", code, errOut)
	}
	if code, _, errOut := audit("-n", "audit-shop", "--audit", "--write-reports", "--deployment", "staging"); code != 0 {
		t.Fatalf("--write-reports --deployment staging: exit %d %s", code, errOut)
	}
	staging, err := reports.Get(ctx, "staging", metav1.GetOptions{})
	if err != nil || staging.GetLabels()["admitfn.io/deployment"] != "staging" {
		t.Fatalf("staging's report: %v %v", staging, err)
	}
	cmd = exec.Command(kube.cliBin, "apply", "-p", quiet, "--cluster", "--kubeconfig", kubeconfig, "-n", "audit-shop", "--write-reports", "--deployment", "staging")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("--write-reports --deployment staging with no results: %v\n%s", err, out)
	}
	if _, err := reports.Get(ctx, "staging", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("staging's stale report: %v, want it deleted", err)
	}
	if _, err := reports.Get(ctx, "admitfn", metav1.GetOptions{}); err != nil {
		t.Errorf("the default deployment's report went with staging's: %v", err)
	}

	// The deployed webhook decides as the audit did: web's update is
	// denied with the same message, api's is allowed.
	deployAdmitfn(t, map[string]string{"p.yaml": auditPolicies})
	w := &warnings{}
	err = waitFor(func() error {
		d, err := cs.AppsV1().Deployments("audit-shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Labels = map[string]string{"touched": "yes"}
		_, err = cs.AppsV1().Deployments("audit-shop").Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if got := result(err, w); got.allowed {
			return fmt.Errorf("not denied yet")
		} else if !strings.HasSuffix(got.message, "ValidatingAdmissionPolicy 'replicas.audit.admitfn.io' with binding 'replicas-shop' denied request: at least 2 replicas") {
			return fmt.Errorf("denied with %q", got.message)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := cs.AppsV1().Deployments("audit-shop").Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments("audit-shop").Update(ctx, api, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("api's update: %v", err)
	}
}

// sameLines reports whether out holds want's lines in some order, plus a
// summary line.
func sameLines(out, want string) bool {
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) < 1 || !strings.HasPrefix(got[len(got)-1], "3 resources: ") {
		return false
	}
	// Resources print in list order (deployments, then configmaps, each
	// by name); compare the blocks as sets.
	blocks := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if strings.HasPrefix(l, "  ") && len(out) > 0 {
				out[len(out)-1] += "\n" + l
			} else {
				out = append(out, l)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(blocks(got[:len(got)-1]), blocks(strings.Split(strings.TrimSpace(want), "\n")))
}

// auditKubeconfig writes a kubeconfig for a service account bound to
// docs/audit-rbac.yaml's ClusterRole: the audit runs with what the docs
// say it needs, no more.
func auditKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	cs, _ := kube.client(t)
	raw, err := os.ReadFile("../../docs/audit-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	namespace(t, "audit-runner", nil)
	if _, err := cs.CoreV1().ServiceAccounts("audit-runner").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "admitfn-audit"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "admitfn-audit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "admitfn-audit", Namespace: "audit-runner"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	tok, err := cs.CoreV1().ServiceAccounts("audit-runner").CreateToken(ctx, "admitfn-audit", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: kube.config.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["audit"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["audit"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "audit", Namespace: "audit-other"}
	cfg.CurrentContext = "audit"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func ptrInt64(v int64) *int64 { return &v }

// installPolicyReportCRDs installs the wgpolicyk8s.io/v1alpha2 report
// kinds (their schemas left open: the apply tests check the reports
// against the real ones) once per run.
func installPolicyReportCRDs(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(kube.config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, k := range []struct{ kind, plural, scope string }{{"PolicyReport", "policyreports", "Namespaced"}, {"ClusterPolicyReport", "clusterpolicyreports", "Cluster"}} {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": k.plural + ".wgpolicyk8s.io"},
			"spec": map[string]any{
				"group": "wgpolicyk8s.io", "scope": k.scope,
				"names": map[string]any{"kind": k.kind, "plural": k.plural, "listKind": k.kind + "List", "singular": strings.ToLower(k.kind)},
				"versions": []any{map[string]any{"name": "v1alpha2", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if _, err := crds.Create(context.Background(), crd, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	err = waitFor(func() error {
		_, err := dyn.Resource(schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}).List(context.Background(), metav1.ListOptions{Limit: 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
