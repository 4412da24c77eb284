package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// sentinel is a policy added to every bundle: it denies CREATE of one
// ServiceAccount name (a resource no test policy touches), so a dry-run
// create tells whether the configuration serving this bundle is active.
func sentinel(name string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s.sentinel.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [serviceaccounts]}]
  validations: [{expression: "object.metadata.name != '%[1]s'", message: "admitfn sentinel"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s.sentinel.admitfn.io}
spec: {policyName: %[1]s.sentinel.admitfn.io, validationActions: [Deny]}
`, name)
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// k8sName makes a DNS label from a test name.
func k8sName(t *testing.T) string {
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(n) > 50 {
		n = strings.Trim(n[len(n)-50:], "-")
	}
	return n
}

// sentinelDenied reports whether a dry-run create of the sentinel
// ServiceAccount is denied by the sentinel policy.
func sentinelDenied(cs *kubernetes.Clientset, name string) (bool, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cs.CoreV1().ServiceAccounts("default").Create(context.Background(), sa, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return false, nil
	case strings.Contains(err.Error(), "admitfn sentinel"):
		return true, nil
	default:
		return false, err
	}
}

// waitSentinel waits until the sentinel is denied (active) or admitted.
func waitSentinel(t *testing.T, cs *kubernetes.Clientset, name string, active bool) {
	t.Helper()
	err := waitFor(func() error {
		denied, err := sentinelDenied(cs, name)
		if err != nil && active {
			return err
		}
		if denied != active {
			return fmt.Errorf("sentinel %s: denied=%v, want %v", name, denied, active)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deployAdmitfn serves files (plus a sentinel) with admitfn, installs the
// rendered configuration, and waits until kube-apiserver uses it. Removal is
// waited for at cleanup too, so tests don't see each other's webhooks.
func deployAdmitfn(t *testing.T, files map[string]string, renderArgs ...string) (*admitfn, string) {
	t.Helper()
	return deployAdmitfnVia(t, viaServer, files, renderArgs...)
}

// deployAdmitfnVia is deployAdmitfn through the given front.
func deployAdmitfnVia(t *testing.T, via front, files map[string]string, renderArgs ...string) (*admitfn, string) {
	t.Helper()
	a, dir, _ := startAdmitfnVia(t, via, files, k8sName(t), nil, renderArgs...)
	return a, dir
}

// installAdmitfn is deployAdmitfn with an explicit uninstall, for callers
// that must remove the webhook before the test ends. The bundle is served
// as admitfn push publishes it: the parity suites, its callers, hold
// kube-apiserver's decisions against policies compiled on first use.
func installAdmitfn(t *testing.T, files map[string]string, name string, renderArgs ...string) func() {
	t.Helper()
	a, _, removeConfig := startAdmitfnVia(t, viaPushed, files, name, nil, renderArgs...)
	return func() {
		removeConfig()
		a.stop()
	}
}

// startAdmitfn serves files plus a sentinel (two for a bundle with
// MutatingAdmissionPolicies), installs the rendered configurations (the
// validating one after edit, when given) and waits until they are in force.
func startAdmitfn(t *testing.T, files map[string]string, name string, edit func(*admissionregistrationv1.ValidatingWebhookConfiguration), renderArgs ...string) (*admitfn, string, func()) {
	t.Helper()
	return startAdmitfnVia(t, viaServer, files, name, edit, renderArgs...)
}

// startAdmitfnVia is startAdmitfn through the given front.
func startAdmitfnVia(t *testing.T, via front, files map[string]string, name string, edit func(*admissionregistrationv1.ValidatingWebhookConfiguration), renderArgs ...string) (*admitfn, string, func()) {
	t.Helper()
	return startAdmitfnOn(t, kube.config, via, files, name, edit, nil, renderArgs...)
}

// startAdmitfnOn is startAdmitfnVia for the kube-apiserver config reaches,
// the server (viaServer, viaPushed) started with serverArgs.
func startAdmitfnOn(t *testing.T, config *rest.Config, via front, files map[string]string, name string, edit func(*admissionregistrationv1.ValidatingWebhookConfiguration), serverArgs []string, renderArgs ...string) (*admitfn, string, func()) {
	t.Helper()
	files["zz-sentinel.yaml"] = sentinel(name)
	mutating := false
	for _, content := range files {
		mutating = mutating || strings.Contains(content, "kind: MutatingAdmissionPolicy")
	}
	if mutating {
		files["zz-sentinel-mutating.yaml"] = mutatingSentinel(name)
	}
	dir := writeBundle(t, files)
	var a *admitfn
	switch via {
	case viaLambda:
		a = kube.serveLambda(t, dir)
	case viaGCF:
		a = kube.serveGCF(t, dir)
	case viaPushed:
		pushed := filepath.Join(t.TempDir(), "pushed")
		if out, err := exec.Command(kube.cliBin, "push", "-p", dir, "--to", pushed).CombinedOutput(); err != nil {
			t.Fatalf("admitfn push: %v\n%s", err, out)
		}
		a = kube.serve(t, pushed, "", serverArgs...)
		if !strings.Contains(a.Logs(), `"packed":true,"compile_on_use":`) {
			t.Fatalf("the pushed bundle is not read packed and compiled on use:\n%s", a.Logs())
		}
	default:
		a = kube.serve(t, dir, "", serverArgs...)
	}
	cfg := kube.render(t, dir, "https://"+a.addr, name, renderArgs...)
	if edit != nil {
		edit(cfg.validating)
	}
	cs := clientFor(t, config)
	ctx := context.Background()
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg.validating, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	if cfg.mutating != nil {
		if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg.mutating, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create mutating webhook configuration: %v", err)
		}
	}
	removed := false
	uninstall := func() {
		if removed {
			return
		}
		removed = true
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		waitSentinel(t, cs, name, false)
		if cfg.mutating != nil {
			cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
			waitMutatingSentinel(t, cs, name, false)
		}
	}
	t.Cleanup(uninstall) // also when setup fails below
	waitSentinel(t, cs, name, true)
	if cfg.mutating != nil {
		waitMutatingSentinel(t, cs, name, true)
	}
	return a, dir, uninstall
}

// mutatingSentinel is a MutatingAdmissionPolicy added to bundles that have
// mutating policies: it labels ServiceAccounts named "<name>-m", so a dry-run
// create tells whether the mutating configuration is active.
func mutatingSentinel(name string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %[1]s.msentinel.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [serviceaccounts]}]
  matchConditions: [{name: sentinel, expression: "object.metadata.name == '%[1]s-m'"}]
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: 'Object{metadata: Object.metadata{labels: {"admitfn-sentinel": "mutated"}}}'}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %[1]s.msentinel.admitfn.io}
spec: {policyName: %[1]s.msentinel.admitfn.io}
`, name)
}

// waitMutatingSentinel waits until the mutating sentinel labels (active) or
// no longer labels its ServiceAccount.
func waitMutatingSentinel(t *testing.T, cs *kubernetes.Clientset, name string, active bool) {
	t.Helper()
	err := waitFor(func() error {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name + "-m"}}
		got, err := cs.CoreV1().ServiceAccounts("default").Create(context.Background(), sa, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if mutated := got.Labels["admitfn-sentinel"] == "mutated"; mutated != active {
			return fmt.Errorf("mutating sentinel %s: mutated=%v, want %v", name, mutated, active)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// clientFor is a clientset for config.
func clientFor(t *testing.T, config *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace with labels (namespaces are never deleted:
// no namespace controller runs, so they would stay Terminating).
func namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	cs, _ := kube.client(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := cs.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
		if getErr != nil {
			t.Fatal(getErr)
		}
		existing.Labels = labels
		_, err = cs.CoreV1().Namespaces().Update(context.Background(), existing, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// outcome is what a user sees for one API request.
type outcome struct {
	allowed  bool
	code     int32
	message  string
	warnings []string
}

func result(err error, w *warnings) outcome {
	o := outcome{allowed: err == nil, warnings: w.take()}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		o.code, o.message = se.ErrStatus.Code, se.ErrStatus.Message
	} else if err != nil {
		o.message = err.Error()
	}
	return o
}

func expect(t *testing.T, what string, got, want outcome) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got: %+v\nwant: %+v", what, got, want)
	}
}

// expectSoon is expect for the first request after a namespace's labels
// change: kube-apiserver matches webhooks' namespaceSelectors against its
// own namespace cache, which learns of the change a moment later, so the
// request is repeated (every 100ms, for up to patience) until the answer is the
// one wanted, and the last answer is what a failure reports.
func expectSoon(t *testing.T, what string, do func() outcome, want outcome) {
	t.Helper()
	got := do()
	for deadline := time.Now().Add(patience); !reflect.DeepEqual(got, want) && time.Now().Before(deadline); got = do() {
		time.Sleep(100 * time.Millisecond)
	}
	expect(t, what, got, want)
}

// impersonate returns a client acting as user in groups.
func impersonate(t *testing.T, user string, groups ...string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(kube.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
