package review

import (
	"bytes"
	"errors"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The single-parse path reads a body with the JSON v2 decoder
// (github.com/go-json-experiment/json, the module encoding/json/v2 comes
// from): one pass, without encoding/json's validity scan ahead of decoding.
// Its defaults are the strictness this path needs: field names match in
// their own case only, a name given twice and a string that is not valid
// UTF-8 are errors; unknown fields are errors by option. Any error leaves the
// body to the plain path, so what this path decodes it decodes exactly as
// the plain path would (TestDecodePathsAgree, FuzzDecode).

// onceEnvelope is the wire shape decodeOnce reads: the request's objects go
// straight to maps, in place of the typed request's raw bytes.
type onceEnvelope struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Request    *onceRequest `json:"request"`
}

type onceRequest struct {
	admissionv1.AdmissionRequest
	Object    map[string]any `json:"object"`
	OldObject map[string]any `json:"oldObject"`
	Options   map[string]any `json:"options"`
}

// onceOptions: strict about fields, and the objects built by readObject,
// with util/json's numbers.
var onceOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, m *map[string]any) error {
		if dec.PeekKind() == 'n' {
			_, err := dec.ReadToken()
			*m = nil
			return err
		}
		var err error
		*m, err = readObject(dec)
		return err
	})),
)

// decodeOnce is Decode's single-parse path; errTryPlain leaves the body to
// the plain path.
func decodeOnce(body []byte) (*Request, error) {
	var env onceEnvelope
	if err := jsonv2.Unmarshal(body, &env, onceOptions); err != nil || env.Request == nil {
		return nil, errTryPlain
	}
	typed := envelope{APIVersion: env.APIVersion, Kind: env.Kind, Request: &env.Request.AdmissionRequest}
	if err := typed.check(); err != nil {
		return nil, err
	}
	r := &Request{APIVersion: env.APIVersion, AdmissionRequest: typed.Request}
	for _, o := range []struct {
		m   map[string]any
		dst **unstructured.Unstructured
	}{{env.Request.Object, &r.Object}, {env.Request.OldObject, &r.OldObject}, {env.Request.Options, &r.Options}} {
		if o.m != nil {
			*o.dst = &unstructured.Unstructured{Object: o.m}
		}
	}
	return r, nil
}

// errNotObject: a request's object, oldObject or options is neither an
// object nor null (the plain path words the error).
var errNotObject = errors.New("not a JSON object")

// readObject reads a JSON object as util/json's unstructured decoding gives
// it: map[string]any, []any, string, bool, nil, and numbers as int64 when
// they are integers that fit, else float64.
func readObject(dec *jsontext.Decoder) (map[string]any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, errNotObject
	}
	m := make(map[string]any)
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids the token
		v, err := readValue(dec)
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	_, err = dec.ReadToken()
	return m, err
}

func readValue(dec *jsontext.Decoder) (any, error) {
	switch dec.PeekKind() {
	case '{':
		return readObject(dec)
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		s := []any{}
		for dec.PeekKind() != ']' {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		_, err := dec.ReadToken()
		return s, err
	case '0':
		raw, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return number(raw)
	}
	// A string, a literal, or an error (PeekKind says 0), which the read
	// returns.
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	default:
		return tok.String(), nil
	}
}

// number is a JSON number as util/json decodes it into an unstructured
// object: int64 when it is an integer in range, else float64; one out of
// float64's range is an error.
func number(raw []byte) (any, error) {
	// A fraction or an exponent is never an int64 to util/json: skip the
	// failed ParseInt (and its error's allocation) for those.
	if bytes.IndexAny(raw, ".eE") < 0 {
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return i, nil
		}
	}
	return strconv.ParseFloat(string(raw), 64)
}
