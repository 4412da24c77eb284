package celeval

import (
	"fmt"
	"github.com/admitfn/admitfn/core/celeval/internal/objectval"
	"slices"

	"github.com/google/cel-go/common/types/ref"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	celcommon "k8s.io/apiserver/pkg/cel/common"

	"github.com/admitfn/admitfn/core/review"
)

// Attributes is one review's admission.Attributes. Besides what upstream's
// record holds, it builds the CEL `request` value once and collects the audit
// annotations upstream's dispatcher publishes. A review runs on one
// goroutine, so no locking is needed (nor in the CEL values, which cache the
// fields they have converted).
type Attributes struct {
	admission.Attributes
	req *review.Request

	request        ref.Val
	requestSize    measure // inputSize's measure of request
	requestSized   bool
	namespace      ref.Val
	namespaceName  string
	namespaceWhole bool
	annotations    map[string]string
	keys           []string

	// shareObjects: the review is validating, so its objects do not change
	// and their CEL values (objectval.Of) are shared by every policy.
	shareObjects      bool
	object, oldObject sharedObject
	// lazyVals are a mutating review's object values (lazyValue).
	lazyVals []lazyVal
	// memos are what policy evaluations remember of their variables
	// (variables.go); only a validating review has them.
	memos map[memoKey][]*variableMemo
	// binding is the binding upstream's dispatcher matched last: the one
	// the policy's next evaluation is for (validate's report).
	binding string
	// params are the params objects measured (inputSize).
	params []measured
	// longest is reviewLongest's measure, once measured.
	longest         int64
	longestMeasured bool

	// cluster is the cluster the review is for, when the function can read
	// it (UseCluster).
	cluster *clusterReads
}

// sharedObject is the CEL value of one object, remembered with the object
// it is the value of.
type sharedObject struct {
	src   runtime.Object
	shape *objectval.Shape
	val   ref.Val
	// size is inputSize's measure of src, once sized.
	size  measure
	sized bool
}

// NewAttributes builds the attributes of a decoded review request.
func NewAttributes(req *review.Request) *Attributes {
	var obj, oldObj, opts runtime.Object
	if req.Object != nil {
		obj = req.Object
	}
	if req.OldObject != nil {
		oldObj = req.OldObject
	}
	if req.Options != nil {
		opts = req.Options
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = []string(v)
	}
	userInfo := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra}
	dryRun := req.DryRun != nil && *req.DryRun
	return &Attributes{
		Attributes: admission.NewAttributesRecord(obj, oldObj, req.GroupVersionKind(), req.Namespace, req.Name,
			req.GroupVersionResource(), req.SubResource, admission.Operation(req.Operation), opts, dryRun, userInfo),
		req: req,
	}
}

// Validating marks a as a validating review's attributes, and returns it:
// nothing changes a validating review's objects, so their CEL values and
// the policies' variables are shared by every policy and binding
// (objectval.Of, variables.go). The Dispatcher marks the attributes it is
// given; never mark a mutating review's, whose object changes between
// mutations.
func (a *Attributes) Validating() *Attributes {
	a.shareObjects = true
	return a
}

// celRequest is the CEL `request` variable, built as upstream builds it
// (plugincel.CreateAdmissionRequest, wrapped by celcommon.SchemalessTypedToVal,
// which converts a field when an expression first reads it), once per
// review: every policy shares the fields already converted. kube-apiserver
// has already resolved the equivalent kind for the webhook, so the request's
// requestKind/requestResource are the originals it received.
func (a *Attributes) celRequest() ref.Val {
	if a.request != nil {
		return a.request
	}
	r := plugincel.CreateAdmissionRequest(a.Attributes, metav1.GroupVersionResource(a.GetResource()), metav1.GroupVersionKind(a.GetKind()))
	if a.req.RequestKind != nil {
		r.RequestKind = a.req.RequestKind
	}
	if a.req.RequestResource != nil {
		r.RequestResource = a.req.RequestResource
	}
	if a.req.RequestSubResource != "" {
		r.RequestSubResource = a.req.RequestSubResource
	}
	a.request = celcommon.SchemalessTypedToVal(r)
	a.requestSize, a.requestSized = admissionRequestSize(r)
	return a.request
}

// celObject is the CEL value of lazy's object: on a validating review, one
// objectval.Of shared by every policy; otherwise upstream's. An object of a
// built-in kind is read as kube-apiserver reads its Go value once a
// condition has been evaluated on it (internal/objectval).
func (a *Attributes) celObject(lazy *admission.LazyObject, shared *sharedObject) (ref.Val, error) {
	u, ok := lazy.Object().(*unstructured.Unstructured)
	if !ok {
		return lazy.CELValue()
	}
	var s *objectval.Shape
	//nolint:staticcheck // upstream's own switch, read as it reads it (admission.LazyObject.CELValue).
	if lazy.UseSchemalessTypeRef {
		s = objectval.KindShape(u.GroupVersionKind())
	}
	if !a.shareObjects {
		return a.lazyValue(lazy, u, s)
	}
	if shared.src != u || shared.shape != s {
		*shared = sharedObject{src: u, shape: s, val: objectval.Shaped(u.Object, s)}
	}
	return shared.val, nil
}

// lazyValue is the value of a mutating review's object as upstream's
// LazyObject keeps it: computed on first use (typed when shape s is given)
// and kept until the object is replaced, so a value read before any
// condition switched the object to its Go type stays unstructured, as in
// kube-apiserver.
func (a *Attributes) lazyValue(lazy *admission.LazyObject, u *unstructured.Unstructured, s *objectval.Shape) (ref.Val, error) {
	i := slices.IndexFunc(a.lazyVals, func(v lazyVal) bool { return v.lazy == lazy })
	if i >= 0 && a.lazyVals[i].src == u {
		return a.lazyVals[i].val, nil
	}
	var v ref.Val
	if s != nil {
		v = objectval.Shaped(u.Object, s)
	} else {
		var err error
		if v, err = lazy.CELValue(); err != nil {
			return nil, err
		}
	}
	if i < 0 {
		a.lazyVals = append(a.lazyVals, lazyVal{lazy: lazy})
		i = len(a.lazyVals) - 1
	}
	a.lazyVals[i].src, a.lazyVals[i].val = u, v
	return v, nil
}

// lazyVal is a mutating review's object value, with the object it is of.
type lazyVal struct {
	lazy *admission.LazyObject
	src  runtime.Object
	val  ref.Val
}

// celNamespace is the CEL `namespaceObject`: the namespace the request
// names, by name only, or whole when read from the cluster (clusterReads).
func (a *Attributes) celNamespace(ns *corev1.Namespace) ref.Val {
	whole := a.cluster != nil && a.cluster.namespace == ns
	if a.namespace != nil && a.namespaceName == ns.Name && a.namespaceWhole == whole {
		return a.namespace
	}
	a.namespace, a.namespaceName, a.namespaceWhole = celcommon.SchemalessTypedToVal(plugincel.CreateNamespaceObject(ns)), ns.Name, whole
	return a.namespace
}

// AddAnnotation records an audit annotation with upstream's rule: a key once
// set cannot be given another value.
func (a *Attributes) AddAnnotation(key, value string) error {
	return a.AddAnnotationWithLevel(key, value, auditinternal.LevelMetadata)
}

// AddAnnotationWithLevel implements admission.Attributes.
func (a *Attributes) AddAnnotationWithLevel(key, value string, _ auditinternal.Level) error {
	if a.annotations == nil {
		a.annotations = map[string]string{}
	}
	if old, ok := a.annotations[key]; ok {
		if old != value {
			return fmt.Errorf("admission annotations are not allowed to be overwritten, key: %q", key)
		}
		return nil
	}
	a.annotations[key] = value
	a.keys = append(a.keys, key)
	return nil
}

// Annotations returns the audit annotations in the order they were added.
func (a *Attributes) Annotations() (keys []string, values map[string]string) {
	return a.keys, a.annotations
}

// Remembered is how many evaluations' variables the review remembers: one
// for each policy, params, namespace and object version it was evaluated
// with. The parity tests read it to know that remembering was exercised.
func (a *Attributes) Remembered() int { return len(a.memos) }

// SetBinding notes the binding the dispatcher has just matched: it
// evaluates the binding's policy next, before matching another.
func (a *Attributes) SetBinding(name string) { a.binding = name }

// Binding is the binding noted last.
func (a *Attributes) Binding() string { return a.binding }

// reviewLongest is the longest list or map of the review's objects as
// received, measured once. A mutating review's objects change between
// mutations and are not measured for bounds; this decides only whether
// its tracked evaluations are tracked linearly, a choice of speed (both
// trackers count the same).
func (a *Attributes) reviewLongest() int64 {
	if !a.longestMeasured && a.req != nil {
		for _, o := range []*unstructured.Unstructured{a.req.Object, a.req.OldObject} {
			if o != nil {
				a.longest = max(a.longest, longestIn(o.Object))
			}
		}
		a.longestMeasured = true
	}
	return a.longest
}

// longestIn is the longest list or map in v.
func longestIn(v any) int64 {
	var n int64
	switch v := v.(type) {
	case map[string]any:
		n = int64(len(v))
		for _, e := range v {
			n = max(n, longestIn(e))
		}
	case []any:
		n = int64(len(v))
		for _, e := range v {
			n = max(n, longestIn(e))
		}
	}
	return n
}
