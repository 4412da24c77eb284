package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// A parity case is a bundle, the labels of the namespace its requests run
// in, and the requests. The runner plays it twice against the same
// kube-apiserver — natively (the objects applied) and through admitfn (the
// bundle served, the rendered configuration installed) — and compares what
// the user sees: allowed, message, HTTP code, warnings, audit annotations.
type parityCase struct {
	name     string
	labels   map[string]string // of the case's namespace
	bundle   string            // YAML; "$NS" is the case's namespace
	requests []parityRequest
	// diverge, when set, is the reason the two must differ, and admitfn
	// is the message admitfn must give instead (after the common prefix).
	diverge string
	admitfn string
}

type parityRequest struct {
	verb   string // create, update, delete, dryrun (a dry-run create)
	object string // YAML; namespace is the case's
	// as, when set, is the user the request is made as (the runner's
	// users), instead of the admin.
	as string
}

// observed is one request's outcome, normalised so the native and the
// webhook paths are comparable.
type observed struct {
	Allowed     bool
	Code        int32
	Message     string
	Warnings    []string
	Annotations map[string]string
}

var (
	nativePrefix = regexp.MustCompile(`^[a-z0-9.-]+ "[^"]*" is forbidden: `)
	webhookKey   = regexp.MustCompile(`^([0-9a-f]+\.)?(validate|mutate)\.[a-z0-9.-]*admitfn\.io/`)
)

// normaliseAnnotations maps both paths' audit keys to "<policy>/<key>" and
// "validation_failure", keeping only admission policy annotations.
func normaliseAnnotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		switch {
		case k == "validation.policy.admission.k8s.io/validation_failure":
			out["validation_failure"] = v
		case webhookKey.MatchString(k):
			rest := webhookKey.ReplaceAllString(k, "")
			if rest == "validation_failure" {
				out[rest] = v
			} else if p, key, ok := strings.Cut(rest, "_"); ok && !strings.Contains(p, "sentinel") {
				out[p+"/"+key] = v
			}
		case strings.HasPrefix(k, "authorization.k8s.io/"), strings.HasPrefix(k, "apiserver.latency.k8s.io/"), strings.HasPrefix(k, "mutation.webhook.admission.k8s.io/"), strings.HasPrefix(k, "pod-security.kubernetes.io/"):
		default:
			if strings.Contains(k, "/") && !strings.Contains(k, "sentinel") {
				out[k] = v
			}
		}
	}
	for k, v := range out {
		// Values of several params are joined with ", " in the order the
		// apiserver's informer lists them, which is random; admitfn's is by
		// name. Compare them as sets.
		if k != "validation_failure" && strings.Contains(v, ", ") {
			parts := strings.Split(v, ", ")
			sort.Strings(parts)
			out[k] = strings.Join(parts, ", ")
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

type parityRunner struct {
	t            *testing.T
	dyn          dynamic.Interface
	mapper       meta.RESTMapper
	warn         *warnings
	cleanupLater []func()
	// config reaches the runner's kube-apiserver as the admin; users are
	// who requests may be made as (parityRequest.as).
	config *rest.Config
	users  map[string]rest.ImpersonationConfig
}

func newParityRunner(t *testing.T) *parityRunner { return newParityRunnerOn(t, kube.config) }

// newParityRunnerOn is a runner for the kube-apiserver config reaches.
func newParityRunnerOn(t *testing.T, config *rest.Config) *parityRunner {
	w := &warnings{}
	cfg := rest.CopyConfig(config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	return &parityRunner{t: t, dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups), warn: w, config: config}
}

// as is the dynamic client of user (the admin's when "").
func (r *parityRunner) as(user string) dynamic.Interface {
	r.t.Helper()
	if user == "" {
		return r.dyn
	}
	who, ok := r.users[user]
	if !ok {
		r.t.Fatalf("no user %q", user)
	}
	cfg := rest.CopyConfig(r.config)
	cfg.WarningHandler = r.warn
	cfg.Impersonate = who
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return dyn
}

func (r *parityRunner) decode(doc, ns string) []*unstructured.Unstructured {
	r.t.Helper()
	doc = strings.ReplaceAll(doc, "$NS", ns)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(doc)))
	var out []*unstructured.Unstructured
	for {
		chunk, err := reader.Read()
		if err != nil {
			break
		}
		if strings.TrimSpace(string(chunk)) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(chunk, &u.Object); err != nil {
			r.t.Fatalf("case YAML: %v\n%s", err, chunk)
		}
		out = append(out, u)
	}
	return out
}

func (r *parityRunner) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, schema.GroupVersionResource) {
	r.t.Helper()
	gvk := u.GroupVersionKind()
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		r.t.Fatalf("map %v: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), m.Resource
	}
	return r.dyn.Resource(m.Resource), m.Resource
}

// applyNative creates the bundle's objects in the cluster — params first,
// then policies and bindings, the sentinel (sentinelDoc) last — and waits
// until kube-apiserver enforces them (wait(true)).
func (r *parityRunner) applyNative(bundle, ns, sentinelDoc string, wait func(active bool)) (params, policies []*unstructured.Unstructured) {
	r.t.Helper()
	for _, u := range r.decode(bundle+"\n---\n"+sentinelDoc, ns) {
		if u.GroupVersionKind().Group == "admissionregistration.k8s.io" {
			policies = append(policies, u)
		} else {
			params = append(params, u)
		}
	}
	for _, u := range append(append([]*unstructured.Unstructured{}, params...), policies...) {
		ri, _ := r.resource(u)
		if _, err := ri.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			r.t.Fatalf("native: create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	wait(true)
	return params, policies
}

// removeNative deletes policies and bindings (sentinel last), waits until
// kube-apiserver stops enforcing them (wait(false)), then deletes the params.
// Deleting twice is harmless.
func (r *parityRunner) removeNative(params, policies []*unstructured.Unstructured, wait func(active bool)) {
	r.t.Helper()
	del := func(objs []*unstructured.Unstructured) {
		for _, u := range objs {
			ri, _ := r.resource(u)
			if err := ri.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				r.t.Fatalf("native: delete %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	del(policies)
	wait(false)
	del(params)
}

// warmParams waits until kube-apiserver's param informer for the case's
// paramKind has the params: it starts when the policy appears and can lag
// behind the sentinel. The first request is replayed as a dry run until it
// no longer fails for want of params — unless missing params are what the
// case is about (paramsMayBeMissing).
func (r *parityRunner) warmParams(firstRequest, ns string, paramsMayBeMissing bool) {
	r.t.Helper()
	u := r.decode(firstRequest, ns)[0]
	u.SetNamespace(ns)
	ri, _ := r.resource(u)
	waitFor(func() error {
		_, err := ri.Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			return nil
		case strings.Contains(err.Error(), "not yet synced"):
			return err
		case strings.Contains(err.Error(), "no params found") && !paramsMayBeMissing:
			return err
		}
		return nil
	})
	r.warn.take()
}

// compareOutcomes checks each request's outcome on both paths: equal, or,
// for a case with a divergence, different and with admitfn giving the
// message want.
func compareOutcomes[T any](t *testing.T, requests []parityRequest, native, viaAdmitfn []T, diverge, want string, message func(T) string) {
	t.Helper()
	for j := range requests {
		n, a := native[j], viaAdmitfn[j]
		same := reflect.DeepEqual(n, a)
		switch {
		case diverge == "" && !same:
			t.Errorf("request %d (%s) differs:\n native: %s\nadmitfn: %s", j, requests[j].verb, dumpJSON(n), dumpJSON(a))
		case diverge != "" && same:
			t.Errorf("request %d: expected divergence (%s) but both gave %s", j, diverge, dumpJSON(n))
		case diverge != "" && message(a) != want:
			t.Errorf("request %d: divergence (%s): admitfn gave %s, want message %q (native: %s)", j, diverge, dumpJSON(a), want, dumpJSON(n))
		}
	}
}

func dumpJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func auditOffset() int64 {
	st, err := os.Stat(kube.auditLog)
	if err != nil {
		return 0
	}
	return st.Size()
}

// auditAfter finds the audit event of the request for (verb, resource, ns,
// name) written after offset.
func (r *parityRunner) auditAfter(offset int64, verb, resource, ns, name string) map[string]string {
	var found map[string]string
	waitFor(func() error {
		f, err := os.Open(kube.auditLog)
		if err != nil {
			return err
		}
		defer f.Close()
		f.Seek(offset, 0)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			var ev struct {
				Stage, Verb string
				ObjectRef   struct{ Resource, Subresource, Namespace, Name string }
				Annotations map[string]string
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if ev.Stage == "ResponseComplete" && ev.Verb == verb && ev.ObjectRef.Resource == resource && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name {
				found = ev.Annotations
				return nil
			}
		}
		return fmt.Errorf("no audit event yet")
	})
	return normaliseAnnotations(found)
}

// play runs the requests and cleans up what they created. webhook tells
// which prefix to strip from denials.
func (r *parityRunner) play(c parityCase, ns string, webhook bool) []observed {
	r.t.Helper()
	var out []observed
	type created struct {
		ri   dynamic.ResourceInterface
		name string
	}
	var toDelete []created
	r.warn.take()
	for _, req := range c.requests {
		objs := r.decode(req.object, ns)
		if len(objs) != 1 {
			r.t.Fatalf("request object: %q", req.object)
		}
		u := objs[0]
		u.SetNamespace(ns)
		objNS := ns
		if m, err := r.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version); err == nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
			u.SetNamespace("")
			objNS = ""
		}
		ri, gvr := r.resource(u)
		if req.as != "" {
			ri = r.as(req.as).Resource(gvr)
			if objNS != "" {
				ri = r.as(req.as).Resource(gvr).Namespace(objNS)
			}
		}
		ctx := context.Background()
		offset := auditOffset()
		var err error
		verb := map[string]string{"create": "create", "dryrun": "create", "update": "update", "delete": "delete"}[req.verb]
		switch req.verb {
		case "create":
			_, err = ri.Create(ctx, u, metav1.CreateOptions{})
			if err == nil {
				toDelete = append(toDelete, created{ri, u.GetName()})
			}
		case "dryrun":
			_, err = ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		case "update":
			current, getErr := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
			if getErr != nil {
				r.t.Fatalf("update %s: %v", u.GetName(), getErr)
			}
			u.SetResourceVersion(current.GetResourceVersion())
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		case "delete":
			err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		default:
			r.t.Fatalf("unknown verb %q", req.verb)
		}
		o := observed{Allowed: err == nil, Warnings: r.warn.take()}
		if se, ok := err.(*apierrors.StatusError); ok {
			o.Code, o.Message = se.ErrStatus.Code, se.ErrStatus.Message
			if webhook {
				o.Message = webhookPrefix.ReplaceAllString(o.Message, "")
			} else {
				o.Message = nativePrefix.ReplaceAllString(o.Message, "")
			}
		} else if err != nil {
			o.Message = "client error: " + err.Error()
		}
		o.Annotations = r.auditAfter(offset, verb, gvr.Resource, objNS, u.GetName())
		out = append(out, o)
	}
	r.cleanupLater = append(r.cleanupLater, func() {
		for _, d := range toDelete {
			d.ri.Delete(context.Background(), d.name, metav1.DeleteOptions{})
		}
	})
	return out
}

func runParity(t *testing.T, cases []parityCase) {
	r := newParityRunner(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.t = t
			ns := fmt.Sprintf("parity-%02d", i)
			namespace(t, ns, c.labels)
			sentinelName := fmt.Sprintf("parity-sentinel-%02d", i)

			cs, _ := kube.client(t)
			wait := func(active bool) { waitSentinel(t, cs, sentinelName, active) }
			params, policies := r.applyNative(c.bundle, ns, sentinel(sentinelName), wait)
			t.Cleanup(func() { r.removeNative(params, policies, wait) }) // if the case fails midway
			if len(params) > 0 {
				r.warmParams(c.requests[0].object, ns, false)
			}
			native := r.play(c, ns, false)
			r.removeNative(params, policies, wait)
			r.cleanup()

			for _, pushDown := range pushDownModes(c.bundle) {
				files := map[string]string{"bundle.yaml": strings.ReplaceAll(c.bundle, "$NS", ns)}
				uninstall := installAdmitfn(t, files, sentinelName, "--push-down="+pushDown)
				viaAdmitfn := r.play(c, ns, true)
				uninstall()
				r.cleanup()
				t.Logf("push-down %s", pushDown)
				compareOutcomes(t, c.requests, native, viaAdmitfn, c.diverge, c.admitfn, func(o observed) string { return o.Message })
			}
		})
	}
}

// pushDownModes are the --push-down values a case is played with: on
// (render's default) always, off too when push-down can change what
// kube-apiserver does with the case's requests (the bundle has
// matchConditions, resource names or exclusions to push).
func pushDownModes(bundle string) []string {
	for _, what := range []string{"matchConditions", "resourceNames", "excludeResourceRules"} {
		if strings.Contains(bundle, what) {
			return []string{"true", "false"}
		}
	}
	return []string{"true"}
}

func (r *parityRunner) cleanup() {
	for _, f := range r.cleanupLater {
		f()
	}
	r.cleanupLater = nil
}
