package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/admitfn/admitfn/core/policy"
)

// changeKind is one kind of policy change a publish makes: the bundle
// before and after, and what a ConfigMap create in a prod and a dev
// namespace gets from each.
type changeKind struct {
	name   string
	v1, v2 string
	// want[version][namespace]: "allow", "deny:<message>" or, for a
	// mutating change, "label:<value>".
	want map[string]map[string]string
}

// denyPolicy denies every ConfigMap create with message msg; extra goes
// into its spec, constraints into its matchConstraints.
func denyPolicy(msg, extra, constraints string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: change.e2e.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
` + constraints + extra + `  validations: [{expression: "false", message: "` + msg + `"}]
`
}

func changeBinding(name, env string) string {
	sel := ""
	if env != "" {
		sel = "  matchResources: {namespaceSelector: {matchLabels: {env: " + env + "}}}\n"
	}
	return binding(name, "change.e2e.admitfn.io", "[Deny]", sel)
}

func labelPolicy(value, reinvocation string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: change.e2e.admitfn.io}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  reinvocationPolicy: ` + reinvocation + `
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: 'Object{metadata: Object.metadata{labels: {"admitfn-version": "` + value + `"}}}'}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: change}
spec: {policyName: change.e2e.admitfn.io}
`
}

func deniedBy(binding, msg string) string {
	return "deny:ValidatingAdmissionPolicy 'change.e2e.admitfn.io' with binding '" + binding + "' denied request: " + msg
}

var changeKinds = []changeKind{
	{
		name: "namespaceSelector",
		v1:   denyPolicy("v1", "", "") + changeBinding("b", ""),
		v2:   denyPolicy("v2", "", "") + changeBinding("b", "prod"),
		want: map[string]map[string]string{
			"v1": {"prod": deniedBy("b", "v1"), "dev": deniedBy("b", "v1")},
			"v2": {"prod": deniedBy("b", "v2"), "dev": "allow"},
		},
	},
	{
		name: "failurePolicy",
		v1:   denyPolicy("v1", "  failurePolicy: Fail\n", "") + changeBinding("b", ""),
		v2:   denyPolicy("v2", "  failurePolicy: Ignore\n", "") + changeBinding("b", ""),
		want: map[string]map[string]string{
			"v1": {"prod": deniedBy("b", "v1"), "dev": deniedBy("b", "v1")},
			"v2": {"prod": deniedBy("b", "v2"), "dev": deniedBy("b", "v2")},
		},
	},
	{
		name: "matchPolicy",
		v1:   denyPolicy("v1", "", "    matchPolicy: Equivalent\n") + changeBinding("b", ""),
		v2:   denyPolicy("v2", "", "    matchPolicy: Exact\n") + changeBinding("b", ""),
		want: map[string]map[string]string{
			"v1": {"prod": deniedBy("b", "v1"), "dev": deniedBy("b", "v1")},
			"v2": {"prod": deniedBy("b", "v2"), "dev": deniedBy("b", "v2")},
		},
	},
	{
		name: "binding-added",
		v1:   denyPolicy("v1", "", "") + changeBinding("prod", "prod"),
		v2:   denyPolicy("v2", "", "") + changeBinding("prod", "prod") + changeBinding("dev", "dev"),
		want: map[string]map[string]string{
			"v1": {"prod": deniedBy("prod", "v1"), "dev": "allow"},
			"v2": {"prod": deniedBy("prod", "v2"), "dev": deniedBy("dev", "v2")},
		},
	},
	{
		name: "binding-removed",
		v1:   denyPolicy("v1", "", "") + changeBinding("prod", "prod") + changeBinding("dev", "dev"),
		v2:   denyPolicy("v2", "", "") + changeBinding("prod", "prod"),
		want: map[string]map[string]string{
			"v1": {"prod": deniedBy("prod", "v1"), "dev": deniedBy("dev", "v1")},
			"v2": {"prod": deniedBy("prod", "v2"), "dev": "allow"},
		},
	},
	{
		name: "reinvocationPolicy",
		v1:   labelPolicy("v1", "Never"),
		v2:   labelPolicy("v2", "IfNeeded"),
		want: map[string]map[string]string{
			"v1": {"prod": "label:v1", "dev": "label:v1"},
			"v2": {"prod": "label:v2", "dev": "label:v2"},
		},
	},
}

// TestPolicyChangeKeepsTheClusterUp publishes each kind of change while
// writes run, and applies the new webhook configuration in both orders:
// after the function has loaded the bundle, and before it has (it loads
// it when the first review on a new route arrives). Every write gets the
// decision of the old or the new policies, never an error of the webhook
// call; once both steps are done, only the new.
func TestPolicyChangeKeepsTheClusterUp(t *testing.T) {
	prod, dev := "e2e-change-prod", "e2e-change-dev"
	namespace(t, prod, map[string]string{"env": "prod"})
	namespace(t, dev, map[string]string{"env": "dev"})
	for _, kind := range changeKinds {
		for _, order := range []string{"function-first", "configuration-first"} {
			t.Run(kind.name+"/"+order, func(t *testing.T) {
				policyChange(t, kind, order == "function-first", map[string]string{"prod": prod, "dev": dev})
			})
		}
	}
}

func policyChange(t *testing.T, kind changeKind, functionFirst bool, namespaces map[string]string) {
	name := k8sName(t)
	src1 := writeBundle(t, map[string]string{"policy.yaml": kind.v1})
	src2 := writeBundle(t, map[string]string{"policy.yaml": kind.v2})
	published := filepath.Join(t.TempDir(), "published")
	push := func(src string) string {
		t.Helper()
		out, err := exec.Command(kube.cliBin, "push", "-p", src, "--to", published, "--allow-webhook-change").CombinedOutput()
		if err != nil {
			t.Fatalf("admitfn push: %v\n%s", err, out)
		}
		return string(out)
	}
	push(src1)
	// Function first: the function checks the directory every second, and
	// the configuration is applied once it has loaded the bundle.
	// Configuration first: it checks every hour, so only a review on a
	// route it does not know makes it load the bundle.
	interval := "1h"
	if functionFirst {
		interval = "1s"
	}
	a := kube.serve(t, published, "", "--refresh-interval", interval)
	cs, _ := kube.client(t)
	ctx := context.Background()

	apply := func() {
		t.Helper()
		applyConfigurations(t, cs, kube.render(t, published, "https://"+a.addr, name), name)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// write makes a dry-run ConfigMap create in the namespace for env and
	// says what it got.
	write := func(env string) string {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "change"}}
		got, err := cs.CoreV1().ConfigMaps(namespaces[env]).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			o := result(err, &warnings{})
			if m := webhookPrefix.FindStringSubmatch(o.message); m != nil {
				return "deny:" + strings.TrimPrefix(o.message, m[0])
			}
			return fmt.Sprintf("error:%d %s", o.code, o.message)
		case got.Labels["admitfn-version"] != "":
			return "label:" + got.Labels["admitfn-version"]
		}
		return "allow"
	}
	// settled waits until writes in both namespaces get version's
	// decisions.
	settled := func(version string) {
		t.Helper()
		err := waitFor(func() error {
			for env, want := range kind.want[version] {
				if got := write(env); got != want {
					return fmt.Errorf("%s: got %q, want %s's %q", env, got, version, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, a.Logs())
		}
	}
	apply()
	settled("v1")

	// Writes run from here until after both steps, alternating between the
	// namespaces; the loop is bounded and stops itself.
	type observed struct{ env, got string }
	var (
		mu   sync.Mutex
		seen []observed
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	var stopOnce sync.Once
	halt := func() {
		stopOnce.Do(func() { close(stop) })
		<-done
	}
	t.Cleanup(halt)
	go func() {
		defer close(done)
		for i := 0; i < 20000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			env := []string{"prod", "dev"}[i%2]
			got := write(env)
			mu.Lock()
			seen = append(seen, observed{env, got})
			mu.Unlock()
		}
	}()
	waitWrites := func(n int) {
		t.Helper()
		err := waitFor(func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(seen) < n {
				return fmt.Errorf("%d writes of %d", len(seen), n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitWrites(20)

	v2ID := bundleID(t, src2)
	push(src2)
	if functionFirst {
		if err := waitFor(func() error {
			if !strings.Contains(a.Logs(), `"bundle":"`+v2ID+`"`) {
				return fmt.Errorf("bundle %s not loaded", v2ID)
			}
			return nil
		}); err != nil {
			t.Fatalf("%v\n%s", err, a.Logs())
		}
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		waitWrites(n + 20) // writes through the old configuration, the new bundle loaded
	}
	oldRoutes := routes(kube.render(t, src1, "https://"+a.addr, name))
	apply()
	if fresh := routes(kube.render(t, src2, "https://"+a.addr, name)); !functionFirst && !slices.ContainsFunc(fresh, func(r string) bool { return !slices.Contains(oldRoutes, r) }) {
		// The new configuration names no route the function does not know
		// (a binding removed): nothing makes it load the bundle before its
		// next refresh, in an hour. A review on an unknown route is what
		// starts a check at once.
		poke(t, a)
	}
	settled("v2")
	mu.Lock()
	after := len(seen)
	mu.Unlock()
	waitWrites(after + 20)
	halt()

	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for i, o := range seen {
		old, cur := kind.want["v1"][o.env], kind.want["v2"][o.env]
		counts[o.got]++
		switch {
		case i >= after && o.got != cur:
			t.Errorf("write %d in %s, after both steps: %q, want the new %q", i, o.env, o.got, cur)
		case o.got != old && o.got != cur:
			t.Errorf("write %d in %s: %q, want the old %q or the new %q", i, o.env, o.got, old, cur)
		}
	}
	if t.Failed() {
		t.Logf("outcomes: %v\n%s", counts, a.Logs())
	}
	// The configuration-first order is served because the function loads
	// the bundle on the first review of a route it does not know.
	if !functionFirst && !strings.Contains(a.Logs(), `"previous_bundle":"`+bundleID(t, src1)+`"`) {
		t.Errorf("the function did not load the new bundle:\n%s", a.Logs())
	}
}

// applyConfigurations creates or updates the configurations r holds,
// named name.
func applyConfigurations(t *testing.T, cs *kubernetes.Clientset, r rendered, name string) {
	t.Helper()
	ctx := context.Background()
	if v := r.validating; v != nil {
		existing, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			v.ResourceVersion = existing.ResourceVersion
			_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{})
		} else {
			_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("apply the validating configuration: %v", err)
		}
	}
	if m := r.mutating; m != nil {
		existing, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			m.ResourceVersion = existing.ResourceVersion
			_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
		} else {
			_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("apply the mutating configuration: %v", err)
		}
	}
}

// routes are the URLs of r's webhooks.
func routes(r rendered) []string {
	var out []string
	if r.validating != nil {
		for _, w := range r.validating.Webhooks {
			out = append(out, *w.ClientConfig.URL)
		}
	}
	if r.mutating != nil {
		for _, w := range r.mutating.Webhooks {
			out = append(out, *w.ClientConfig.URL)
		}
	}
	return out
}

func bundleID(t *testing.T, dir string) string {
	t.Helper()
	sources, err := policy.ReadFS(os.DirFS(dir), ".")
	if err != nil {
		t.Fatal(err)
	}
	return policy.ID(sources)
}

// poke sends a review on a route no bundle has, which makes the function
// check its store at once.
func poke(t *testing.T, a *admitfn) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kube.caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"poke","operation":"CREATE",` +
		`"kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},` +
		`"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"poke"}}}}`
	resp, err := client.Post("https://"+a.addr+"/validate/0000000000", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a review on an unknown route: HTTP %d, want 404", resp.StatusCode)
	}
}

// Finding of issue 65: after an unsigned push over a signed location, the
// next signed push found "no bundle" there and dropped the routes in
// transition, so the configuration in place got 404s and the webhook's
// failurePolicy denied writes the policies allow. A bad publish between
// two good ones now loses no retired route: writes through the old
// configuration keep v1's decisions throughout, functions refuse the bad
// bundle, and the new configuration gets v2's.
func TestABadPublishBetweenTwoGoodOnesLosesNoRoute(t *testing.T) {
	prod, dev := "e2e-badpush-prod", "e2e-badpush-dev"
	namespace(t, prod, map[string]string{"env": "prod"})
	namespace(t, dev, map[string]string{"env": "dev"})
	namespaces := map[string]string{"prod": prod, "dev": dev}
	kind := changeKinds[0] // the binding's selector changes: its route moves
	name := k8sName(t)
	src1 := writeBundle(t, map[string]string{"policy.yaml": kind.v1})
	src2 := writeBundle(t, map[string]string{"policy.yaml": kind.v2})
	bad := writeBundle(t, map[string]string{"policy.yaml": denyPolicy("bad", "", "") + changeBinding("b", "dev")})
	published := filepath.Join(t.TempDir(), "published")
	key := filepath.Join(t.TempDir(), "bundle.key")
	if out, err := exec.Command(kube.cliBin, "keygen", "--out", key).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	// The function requires signatures; the pushes run without the
	// variable, as a CI job that holds only the signing key does.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ADMITFN_BUNDLE_PUBLIC_KEY=") {
			env = append(env, e)
		}
	}
	push := func(src string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kube.cliBin, append([]string{"push", "-p", src, "--to", published, "--allow-webhook-change"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("admitfn push %s: %v\n%s", args, err, out)
		}
		return string(out)
	}
	push(src1, "--sign-key", key)
	t.Setenv("ADMITFN_BUNDLE_PUBLIC_KEY", string(pub))
	a := kube.serve(t, published, "", "--refresh-interval", "1s")
	cs, _ := kube.client(t)
	ctx := context.Background()
	applyConfig := func(bundleDir string) {
		t.Helper()
		applyConfigurations(t, cs, kube.render(t, bundleDir, "https://"+a.addr, name), name)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	write := func(env string) string {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "change"}}
		_, err := cs.CoreV1().ConfigMaps(namespaces[env]).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return "allow"
		}
		o := result(err, &warnings{})
		if m := webhookPrefix.FindStringSubmatch(o.message); m != nil {
			return "deny:" + strings.TrimPrefix(o.message, m[0])
		}
		return fmt.Sprintf("error:%d %s", o.code, o.message)
	}
	// decisions asserts version's decisions in both namespaces, waiting
	// for them when settle is set.
	decisions := func(version string, settle bool) {
		t.Helper()
		check := func() error {
			for env, want := range kind.want[version] {
				if got := write(env); got != want {
					return fmt.Errorf("%s: got %q, want %s's %q", env, got, version, want)
				}
			}
			return nil
		}
		err := check()
		if settle {
			err = waitFor(check)
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, a.Logs())
		}
	}
	loads := func() int { return strings.Count(a.Logs(), `"message":"policy bundle loaded"`) }
	waitLogs := func(what string, n int) {
		t.Helper()
		if err := waitFor(func() error {
			if c := strings.Count(a.Logs(), what); c < n {
				return fmt.Errorf("%d of %s logged, want %d", c, what, n)
			}
			return nil
		}); err != nil {
			t.Fatalf("%v\n%s", err, a.Logs())
		}
	}
	applyConfig(src1)
	decisions("v1", true)

	// v2, signed: its route is new, v1's is retired and served with v1.
	n := loads()
	push(src2, "--sign-key", key)
	waitLogs(`"message":"policy bundle loaded"`, n+1)
	decisions("v1", false)

	// The bad publish: unsigned, on purpose. The function refuses it and
	// keeps v2 with v1's retired route.
	push(bad, "--allow-unsigned")
	waitLogs(`"message":"policy bundle refused; serving the last good bundle"`, 1)
	decisions("v1", false)

	// v2 again, signed: it follows the last signed manifest, and keeps the
	// retired route.
	n = loads()
	out := push(src2, "--sign-key", key)
	if want := "retired routes served with bundle " + bundleID(t, src1) + " until "; !strings.Contains(out, want) {
		t.Errorf("the signed push after the bad one:\n%s\nwant it to say %q", out, want)
	}
	if !strings.Contains(out, "warning: following the last signed manifest (.admitfn/signed.json: bundle "+bundleID(t, src2)) {
		t.Errorf("the signed push after the bad one does not say what it followed:\n%s", out)
	}
	waitLogs(`"message":"policy bundle loaded"`, n+1)
	decisions("v1", false) // through the configuration still in place

	applyConfig(src2)
	decisions("v2", true)
}
