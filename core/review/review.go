// Package review decodes AdmissionReview requests (admission.k8s.io v1 and
// v1beta1) and encodes responses in the version that was received.
package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The AdmissionReview versions kube-apiserver sends.
const (
	V1      = "admission.k8s.io/v1"
	V1beta1 = "admission.k8s.io/v1beta1"
)

// ErrMalformed marks a body that is not a usable AdmissionReview. Adapters
// answer it with HTTP 400 and a Status body carrying the error text, which
// never contains object contents.
var ErrMalformed = errors.New("malformed AdmissionReview")

// Request is a decoded AdmissionReview request. Object, OldObject and Options
// are decoded once, with JSON numbers as int64/float64 the way kube-apiserver's
// unstructured conversion produces them for CEL.
type Request struct {
	// APIVersion is the AdmissionReview version received; the answer uses it.
	APIVersion string
	*admissionv1.AdmissionRequest
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured
	Options   *unstructured.Unstructured
}

// envelope is the wire shape shared by v1 and v1beta1: their request and
// response types have identical JSON field sets.
type envelope struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Request    *admissionv1.AdmissionRequest  `json:"request,omitempty"`
	Response   *admissionv1.AdmissionResponse `json:"response,omitempty"`
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Decode parses an AdmissionReview body. Every error wraps ErrMalformed.
//
// A body is parsed once: the typed request and its objects (as the
// unstructured maps CEL reads) in one pass (decodeOnce). Whatever that pass
// does not take exactly as written (a syntax error, a type mismatch, a field
// name in another case, which encoding/json would match, an unknown field, a
// key given twice, a string that is not valid UTF-8) is decoded again by the
// plain path, encoding/json and util/json as kube-apiserver's own code
// decodes, whose errors are the ones users see.
func Decode(body []byte) (*Request, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, malformed("empty body")
	}
	if r, err := decodeOnce(body); !errors.Is(err, errTryPlain) {
		return r, err
	}
	return decodePlain(body)
}

// errTryPlain: decodeOnce leaves the body to decodePlain.
var errTryPlain = errors.New("decode the plain way")

// decodePlain decodes the typed review, then its objects.
func decodePlain(body []byte) (*Request, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, malformed("invalid JSON: %s", jsonErrorText(err))
	}
	if err := env.check(); err != nil {
		return nil, err
	}
	r := &Request{APIVersion: env.APIVersion, AdmissionRequest: env.Request}
	var err error
	if r.Object, err = decodeObject("request.object", env.Request.Object.Raw); err != nil {
		return nil, err
	}
	if r.OldObject, err = decodeObject("request.oldObject", env.Request.OldObject.Raw); err != nil {
		return nil, err
	}
	if r.Options, err = decodeObject("request.options", env.Request.Options.Raw); err != nil {
		return nil, err
	}
	return r, nil
}

// check is what every review must have.
func (env *envelope) check() error {
	switch {
	case env.Kind != "AdmissionReview":
		return malformed("kind is %q, want \"AdmissionReview\"", env.Kind)
	case env.APIVersion != V1 && env.APIVersion != V1beta1:
		return malformed("apiVersion is %q, want %q or %q", env.APIVersion, V1, V1beta1)
	case env.Request == nil:
		return malformed("request is missing")
	case env.Request.UID == "":
		return malformed("request.uid is missing")
	case env.Request.Operation == "":
		return malformed("request.operation is missing")
	case env.Request.Resource.Resource == "" || env.Request.Kind.Kind == "" || env.Request.Kind.Version == "":
		return malformed("request.kind and request.resource are required")
	}
	return nil
}

func decodeObject(field string, raw []byte) (*unstructured.Unstructured, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, malformed("%s is not a JSON object", field)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, malformed("%s: %s", field, jsonErrorText(err))
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// jsonErrorText keeps decoder errors short and free of input bytes.
func jsonErrorText(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at offset %d", syn.Offset)
	case errors.As(err, &typ):
		// Value is the JSON kind, and for a number its digits too
		// ("number 1e400"): only the kind is said.
		kind, _, _ := strings.Cut(typ.Value, " ")
		return fmt.Sprintf("field %q: cannot decode JSON %s into %s", typ.Field, kind, typ.Type)
	default:
		return "cannot decode"
	}
}

// Encode wraps resp in an AdmissionReview of apiVersion.
func Encode(apiVersion string, resp *admissionv1.AdmissionResponse) ([]byte, error) {
	if apiVersion != V1 && apiVersion != V1beta1 {
		return nil, fmt.Errorf("encode AdmissionReview: unsupported apiVersion %q", apiVersion)
	}
	return json.Marshal(envelope{APIVersion: apiVersion, Kind: "AdmissionReview", Response: resp})
}

// GroupVersionKind is the request's kind as a schema type.
func (r *Request) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Kind.Group, Version: r.Kind.Version, Kind: r.Kind.Kind}
}

// GroupVersionResource is the request's resource as a schema type.
func (r *Request) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Resource.Group, Version: r.Resource.Version, Resource: r.Resource.Resource}
}
