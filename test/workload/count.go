package workload

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/render"
	"github.com/admitfn/admitfn/core/review"
)

// Tally is what a workload cost the function: the calls it received, and
// those on which no binding acted (idle: wasted).
type Tally struct{ Calls, Idle int }

// Add is the sum of two tallies.
func (t Tally) Add(o Tally) Tally { return Tally{t.Calls + o.Calls, t.Idle + o.Idle} }

// Waste is the share of calls that were idle.
func (t Tally) Waste() float64 {
	if t.Calls == 0 {
		return 0
	}
	return float64(t.Idle) / float64(t.Calls)
}

const base = "https://fn.example.com"

// Load is the bundle in dir.
func Load(dir string) (*policy.Set, error) { return policy.LoadFS(os.DirFS(dir), ".") }

// Count plays the Default workload through kube-apiserver's matching of
// the webhooks admitfn render gives the bundle set, with or without
// push-down, and through the engine for every call. It fails when a call
// kube-apiserver would skip is one a binding acts on, or a request it would
// reject is one the function allows.
func Count(set *policy.Set, pushDown bool) (Tally, error) {
	e, err := engine.New(set, celeval.NewCompiler())
	if err != nil {
		return Tally{}, err
	}
	opts := render.Options{URL: base, PushDown: pushDown, Policies: set}
	v, err := render.Validating(e.Groups(), opts)
	if err != nil {
		return Tally{}, err
	}
	m, err := render.Mutating(e.Groups(), opts)
	if err != nil {
		return Tally{}, err
	}
	model := Default()
	api := NewAPIServer(model.Namespaces()...)
	var t Tally
	hooks := Webhooks(v, m)
	for _, w := range model.Writes() {
		if err := t.play(api, e, hooks, w); err != nil {
			return t, err
		}
	}
	return t, nil
}

// play makes one write: the mutating webhooks in order, then once more
// those kube-apiserver reinvokes (reinvocationPolicy IfNeeded, called, and
// the object changed after them: by a later webhook, or by kube-apiserver's
// own plugins run again), each seeing the object as the ones before left
// it; then the validating webhooks, on the result.
func (t *Tally) play(api *APIServer, e *engine.Engine, hooks []webhook.WebhookAccessor, w Write) error {
	obj, err := w.New()
	if err != nil {
		return err
	}
	// call sends the write to hook as kube-apiserver would: whether it
	// was called, and whether its patch changed the object.
	call := func(hook webhook.WebhookAccessor) (sent, changed bool, err error) {
		cur := w
		if obj != nil {
			cur = w.With(obj)
		}
		c, rejection := api.Decide(cur, hook)
		if c == NotSent {
			if rejection != nil {
				return false, false, fmt.Errorf("%s %s: %w", w.Verb, w.Name, rejection)
			}
			return false, false, nil
		}
		idle, allowed, patch, err := answer(e, hook.GetClientConfig().URL, cur)
		if err != nil {
			return false, false, err
		}
		switch c {
		case Skipped:
			if !idle {
				return false, false, fmt.Errorf("%s skips %s %s %s/%s by %s, on which a binding acts", hook.GetName(), w.Verb, w.Resource.Resource, w.Namespace, w.Name, w.As.User)
			}
			return false, false, nil
		case Rejected:
			if allowed {
				return false, false, fmt.Errorf("%s rejects %s %s/%s (%v), which the function allows", hook.GetName(), w.Verb, w.Namespace, w.Name, rejection)
			}
			return false, false, nil
		}
		t.Calls++
		if idle {
			t.Idle++
		}
		if len(patch) == 0 || obj == nil {
			return true, false, nil
		}
		before, err := obj.MarshalJSON()
		if err != nil {
			return true, false, err
		}
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return true, false, err
		}
		after, err := p.Apply(before)
		if err != nil || string(after) == string(before) {
			return true, false, err
		}
		obj = &unstructured.Unstructured{}
		return true, true, obj.UnmarshalJSON(after)
	}
	ifNeeded := func(hook webhook.WebhookAccessor) bool {
		mh, ok := hook.GetMutatingWebhook()
		return ok && mh.ReinvocationPolicy != nil && *mh.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
	}
	containersBefore := containers(obj)
	var invoked, reinvoke []int // IfNeeded webhooks called, and those to call again
	for i, hook := range hooks {
		if _, ok := hook.GetMutatingWebhook(); !ok {
			continue
		}
		sent, changed, err := call(hook)
		if err != nil {
			return err
		}
		if changed {
			reinvoke, invoked = append(reinvoke, invoked...), nil
		}
		if sent && ifNeeded(hook) {
			invoked = append(invoked, i)
		}
	}
	if len(reinvoke) > 0 || containers(obj) > containersBefore {
		// A webhook changed the object: kube-apiserver runs its own
		// mutating plugins again, and the ServiceAccount plugin mounts
		// the token into every container a webhook added, a change
		// after every webhook.
		if containers(obj) > containersBefore {
			reinvoke = append(reinvoke, invoked...)
		}
		for i, hook := range hooks {
			if slices.Contains(reinvoke, i) {
				if _, _, err := call(hook); err != nil {
					return err
				}
			}
		}
	}
	for _, hook := range hooks {
		if _, ok := hook.GetMutatingWebhook(); !ok {
			if _, _, err := call(hook); err != nil {
				return err
			}
		}
	}
	return nil
}

// containers counts a Pod's containers and init containers (0 for
// anything else).
func containers(obj *unstructured.Unstructured) int {
	if obj == nil || obj.GetKind() != "Pod" {
		return 0
	}
	n := 0
	for _, f := range []string{"containers", "initContainers"} {
		l, _, _ := unstructured.NestedSlice(obj.Object, "spec", f)
		n += len(l)
	}
	return n
}

// answer is the engine's answer to w on the route of url: whether no
// binding acted (allowed, nothing warned, patched or annotated), and
// whether it allowed.
func answer(e *engine.Engine, url *string, w Write) (idle, allowed bool, patch []byte, err error) {
	rt, ok := policy.ParseRoute(strings.TrimPrefix(*url, base))
	if !ok {
		return false, false, nil, fmt.Errorf("no route in %s", *url)
	}
	body, err := w.Review()
	if err != nil {
		return false, false, nil, err
	}
	req, err := review.Decode(body)
	if err != nil {
		return false, false, nil, err
	}
	res, err := e.Review(context.Background(), rt, req)
	if err != nil {
		return false, false, nil, err
	}
	r := res.Response
	return res.Idle && r.Allowed && len(r.Warnings) == 0 && len(r.Patch) == 0 && len(r.AuditAnnotations) == 0, r.Allowed, r.Patch, nil
}
