package e2e

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/test/workload"
)

// workloadGroup is added to every identity the workload impersonates, and
// bound to cluster-admin: RBAC lets each write through to admission,
// which is what is measured. No policy reads it.
const workloadGroup = "e2e:workload"

// pushdownSentinel's condition fails: kube-apiserver answers a labelled
// ConfigMap's creation itself when it evaluates the condition (push-down)
// and relays the function's denial when it does not, which tells which
// configuration is in force.
const pushdownSentinel = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pushdown-sentinel.e2e}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions: [{name: never, expression: "object.metadata.name == 'never-this-one'"}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pushdown-sentinel.e2e}
spec:
  policyName: pushdown-sentinel.e2e
  validationActions: [Deny]
  matchResources: {objectSelector: {matchLabels: {admitfn.e2e/pushdown-sentinel: "true"}}}
`

var tokenVolume = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)

// writeOutcome is what a write's author sees.
type writeOutcome struct {
	Allowed  bool
	Code     int32
	Message  string
	Warnings []string
	Object   map[string]any // the object answered, without what the server sets anew each time
}

// TestPushDownWorkload plays the workload (test/workload) through
// kube-apiserver, as dry runs, against the example bundle and the policy
// library served by admitfn: with the configuration rendered without
// push-down, then with it. Every write must get the same answer (allowed,
// code, message, warnings, the object as mutated), and the function fewer
// calls, none of them one a binding acted on.
func TestPushDownWorkload(t *testing.T) {
	model := workload.Default()
	cs := clientFor(t, kube.config)
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-workload"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: workloadGroup}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	namespace(t, model.Namespace, model.NamespaceLabels)
	// No controller runs to make the namespace's default ServiceAccount,
	// which Pods need.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: model.Namespace}}
	if _, err := cs.CoreV1().ServiceAccounts(model.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r := newParityRunner(t)
	for _, o := range model.Existing()[1:] {
		ri, _ := r.resource(o)
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetNamespace() != model.Namespace {
			// Nodes and leases outside the namespace, which stays.
			t.Cleanup(func() { ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
		}
	}
	writes := model.Writes()

	for _, dir := range []string{"../../policies/examples", "../../policies/library"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files := bundleFiles(t, dir)
			files["pushdown-sentinel.yaml"] = pushdownSentinel
			name := "pushdown-" + filepath.Base(dir)
			fn, bundleDir, _ := startAdmitfnOn(t, kube.config, viaServer, files, name, nil, nil, "--push-down=false")
			route := sentinelRoute(t, kube.render(t, bundleDir, "https://"+fn.addr, name))

			reviews := func() (calls, idle int) {
				for _, line := range strings.Split(fn.Logs(), "\n") {
					var m struct {
						Message string
						Idle    bool
						Route   string
					}
					if json.Unmarshal([]byte(line), &m) == nil && m.Message == "review" && !strings.Contains(line, "sentinel") && m.Route != route {
						calls++
						if m.Idle {
							idle++
						}
					}
				}
				return calls, idle
			}
			waitPushDown(t, r, fn, route, model.Namespace, false)
			c0, i0 := reviews()
			without := playWrites(t, r, writes)
			c1, i1 := reviews()

			// The same function, its configuration rendered with
			// push-down.
			cfg := kube.render(t, bundleDir, "https://"+fn.addr, name)
			v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			v.Webhooks = cfg.validating.Webhooks
			if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if cfg.mutating != nil {
				m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				m.Webhooks = cfg.mutating.Webhooks
				if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			waitPushDown(t, r, fn, route, model.Namespace, true)
			c2, i2 := reviews()
			with := playWrites(t, r, writes)
			c3, i3 := reviews()

			for i := range writes {
				// The service account token volume's name is random.
				a, b := tokenVolume.ReplaceAllString(dumpJSON(without[i]), "kube-api-access-*"), tokenVolume.ReplaceAllString(dumpJSON(with[i]), "kube-api-access-*")
				if a != b {
					w := writes[i]
					t.Errorf("write %d (%s %s %s/%s by %s) differs:\nwithout: %s\n   with: %s", i, w.Verb, w.Resource.Resource, w.Namespace, w.Name, w.As.User, a, b)
				}
			}
			callsOff, idleOff, callsOn, idleOn := c1-c0, i1-i0, c3-c2, i3-i2
			t.Logf("%d writes: the function received %d calls (%d idle) without push-down, %d (%d idle) with", len(writes), callsOff, idleOff, callsOn, idleOn)
			if callsOff-callsOn != idleOff-idleOn || callsOn > callsOff {
				t.Errorf("push-down removed %d calls, %d of them idle: every call it removes must be idle", callsOff-callsOn, idleOff-idleOn)
			}
			// kube-apiserver's own matching, in process, counts the same
			// (files now holds the sentinels too).
			if want := offline(t, files); want != [4]int{callsOff, idleOff, callsOn, idleOn} {
				t.Errorf("calls and idle calls without and with push-down: kube-apiserver sent %v, test/workload's model of it says %v", [4]int{callsOff, idleOff, callsOn, idleOn}, want)
			}
		})
	}
}

// offline is test/workload's count of calls and idle calls without and
// with push-down for the bundle of files.
func offline(t *testing.T, files map[string]string) [4]int {
	t.Helper()
	var sources []policy.Source
	for name, data := range files {
		sources = append(sources, policy.Source{Name: name, Data: []byte(data)})
	}
	set, err := policy.Parse(sources)
	if err != nil {
		t.Fatal(err)
	}
	off, err := workload.Count(set, false)
	if err != nil {
		t.Fatal(err)
	}
	on, err := workload.Count(set, true)
	if err != nil {
		t.Fatal(err)
	}
	return [4]int{off.Calls, off.Idle, on.Calls, on.Idle}
}

// bundleFiles are the bundle files under dir, by a flat name.
func bundleFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !policy.IsBundleFile(d.Name()) || policy.IsTestFile(d.Name()) {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[strings.ReplaceAll(rel, string(filepath.Separator), "-")] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// waitPushDown waits until the configuration in force does (on) or does
// not push down: the sentinel's condition is false on the probe, so
// kube-apiserver skips the call with push-down and calls the function,
// which logs an idle review on the sentinel's route, without.
func waitPushDown(t *testing.T, r *parityRunner, fn *admitfn, route, ns string, on bool) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "pushdown-sentinel", "namespace": ns, "labels": map[string]any{"admitfn.e2e/pushdown-sentinel": "true"}}}}
	onRoute := func() int { return strings.Count(fn.Logs(), `"route":"`+route+`"`) }
	deadline := time.Now().Add(patience)
	for {
		before := onRoute()
		_, err := r.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Create(context.Background(), cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("the push-down sentinel's probe: %v", err)
		}
		// The function logs a review once it has answered: give it time.
		called := false
		for wait := time.Now().Add(2 * time.Second); !called && time.Now().Before(wait); time.Sleep(50 * time.Millisecond) {
			called = onRoute() > before
		}
		if called != on {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("push-down %v not in force: the sentinel's call was made: %v", on, called)
		}
	}
}

// sentinelRoute is the route of the push-down sentinel's webhook in cfg.
func sentinelRoute(t *testing.T, cfg rendered) string {
	t.Helper()
	for _, w := range cfg.validating.Webhooks {
		if w.ObjectSelector != nil && w.ObjectSelector.MatchLabels["admitfn.e2e/pushdown-sentinel"] == "true" {
			u := *w.ClientConfig.URL
			return u[strings.LastIndex(u, "/validate/"):]
		}
	}
	t.Fatal("no webhook of the push-down sentinel")
	return ""
}

// playWrites makes each write as a dry run, as its author, and returns what
// each got.
func playWrites(t *testing.T, r *parityRunner, writes []workload.Write) []writeOutcome {
	t.Helper()
	clients := map[string]dynamic.Interface{}
	out := make([]writeOutcome, len(writes))
	for i, w := range writes {
		dyn, ok := clients[w.As.User]
		if !ok {
			cfg := rest.CopyConfig(r.config)
			cfg.WarningHandler = r.warn
			cfg.Impersonate = rest.ImpersonationConfig{UserName: w.As.User, Groups: append(append([]string{}, w.As.Groups...), workloadGroup)}
			var err error
			if dyn, err = dynamic.NewForConfig(cfg); err != nil {
				t.Fatal(err)
			}
			clients[w.As.User] = dyn
		}
		var ri dynamic.ResourceInterface = dyn.Resource(w.Resource)
		if w.Namespace != "" {
			ri = dyn.Resource(w.Resource).Namespace(w.Namespace)
		}
		dry := []string{metav1.DryRunAll}
		var got *unstructured.Unstructured
		var err error
		var subresources []string
		if w.Subresource != "" {
			subresources = []string{w.Subresource}
		}
		r.warn.take()
		switch w.Verb {
		case "create":
			got, err = ri.Create(context.Background(), w.Object, metav1.CreateOptions{DryRun: dry}, subresources...)
		case "patch":
			got, err = ri.Patch(context.Background(), w.Name, types.MergePatchType, w.Patch, metav1.PatchOptions{DryRun: dry}, subresources...)
		case "delete":
			err = ri.Delete(context.Background(), w.Name, metav1.DeleteOptions{DryRun: dry})
		default:
			t.Fatalf("write %d: verb %q", i, w.Verb)
		}
		o := writeOutcome{Allowed: err == nil, Warnings: r.warn.take()}
		if err != nil {
			o.Message = err.Error()
			if status, ok := err.(apierrors.APIStatus); ok {
				o.Code = status.Status().Code
			}
		}
		if got != nil {
			for _, f := range []string{"uid", "creationTimestamp", "resourceVersion", "managedFields", "generation"} {
				unstructured.RemoveNestedField(got.Object, "metadata", f)
			}
			o.Object = got.Object
		}
		out[i] = o
	}
	return out
}
