package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const validRequest = `{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","namespace":"default","name":"p","userInfo":{"username":"alice"}`

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		wantErr string // empty: must decode
	}{
		{name: "v1", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"object":{"apiVersion":"v1","kind":"Pod"}}}`},
		{name: "v1beta1", body: `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":` + validRequest + `}}`},
		{name: "empty body", body: " \n", wantErr: "malformed AdmissionReview: empty body"},
		{name: "invalid JSON", body: `{"apiVersion":`, wantErr: "malformed AdmissionReview: invalid JSON: syntax error at offset 14"},
		{name: "syntax error", body: `{"apiVersion" 1}`, wantErr: "malformed AdmissionReview: invalid JSON: syntax error at offset 15"},
		{name: "wrong type", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}`, wantErr: `malformed AdmissionReview: invalid JSON: field "request.uid": cannot decode JSON number into types.UID`},
		{name: "not an object", body: `[1,2]`, wantErr: "malformed AdmissionReview: invalid JSON: field \"\": cannot decode JSON array into review.envelope"},
		{name: "wrong kind", body: `{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}`, wantErr: `malformed AdmissionReview: kind is "Pod", want "AdmissionReview"`},
		{name: "wrong apiVersion", body: `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"}`, wantErr: `malformed AdmissionReview: apiVersion is "admission.k8s.io/v2", want "admission.k8s.io/v1" or "admission.k8s.io/v1beta1"`},
		{name: "missing request", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantErr: "malformed AdmissionReview: request is missing"},
		{name: "missing uid", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`, wantErr: "malformed AdmissionReview: request.uid is missing"},
		{name: "missing operation", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}`, wantErr: "malformed AdmissionReview: request.operation is missing"},
		{name: "missing kind", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE"}}`, wantErr: "malformed AdmissionReview: request.kind and request.resource are required"},
		{name: "object is a string", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"object":"secret-data"}}`, wantErr: "malformed AdmissionReview: request.object is not a JSON object"},
		{name: "oldObject is an array", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"oldObject":[1]}}`, wantErr: "malformed AdmissionReview: request.oldObject is not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decode([]byte(tc.body))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if r.UID != "u-1" || r.Kind.Kind != "Pod" {
					t.Fatalf("decoded %+v", r.AdmissionRequest)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode succeeded, want error %q", tc.wantErr)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secret-data") {
				t.Errorf("error echoes input: %s", err)
			}
		})
	}
}

func TestDecodeObjectNumbersAreCELIntegers(t *testing.T) {
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest +
		`,"object":{"spec":{"replicas":3,"ratio":0.5}},"oldObject":null,"options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}`
	r, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	spec := r.Object.Object["spec"].(map[string]any)
	if got, ok := spec["replicas"].(int64); !ok || got != 3 {
		t.Errorf("replicas = %#v, want int64(3)", spec["replicas"])
	}
	if got, ok := spec["ratio"].(float64); !ok || got != 0.5 {
		t.Errorf("ratio = %#v, want float64(0.5)", spec["ratio"])
	}
	if r.OldObject != nil {
		t.Errorf("oldObject = %v, want nil for JSON null", r.OldObject)
	}
	if r.Options == nil || r.Options.GetKind() != "CreateOptions" {
		t.Errorf("options = %v", r.Options)
	}
}

func TestEncodeAnswersInTheVersionReceived(t *testing.T) {
	for _, version := range []string{V1, V1beta1} {
		out, err := Encode(version, &admissionv1.AdmissionResponse{UID: "u-1", Result: &metav1.Status{Status: metav1.StatusFailure, Message: "no", Reason: metav1.StatusReasonForbidden, Code: 403}})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"apiVersion": version,
			"kind":       "AdmissionReview",
			"response": map[string]any{
				"uid":     "u-1",
				"allowed": false,
				"status":  map[string]any{"metadata": map[string]any{}, "status": "Failure", "message": "no", "reason": "Forbidden", "code": float64(403)},
			},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", version, got, want)
		}
	}
	if _, err := Encode("admission.k8s.io/v2", &admissionv1.AdmissionResponse{UID: "u", Allowed: true}); err == nil {
		t.Error("Encode accepted an unknown version")
	}
}

// Both decoding paths give the same request for every review the tests
// and the benchmarks send; a field name in another case, which
// encoding/json matches, goes the plain way.
func TestDecodePathsAgree(t *testing.T) {
	files, err := filepath.Glob("../../adapters/httpadapter/testdata/*.request.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d golden requests: %v", len(files), err)
	}
	files = append(files, "../../policies/reviews/deployment-production.json", "../../test/perf/testdata/pod-review.json")
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		once, err := decodeOnce(body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		assertSameRequest(t, f, once, body)
	}

	// Every field of the request, and numbers at the edges of int64 and
	// float64, on the single-parse path.
	full := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{` +
		`"uid":"u-2","kind":{"group":"apps","version":"v1","kind":"Scale"},"resource":{"group":"apps","version":"v1","resource":"deployments"},` +
		`"subResource":"scale","requestKind":{"group":"apps","version":"v1beta1","kind":"Scale"},` +
		`"requestResource":{"group":"apps","version":"v1beta1","resource":"deployments"},"requestSubResource":"scale",` +
		`"name":"web","namespace":"prod","operation":"UPDATE",` +
		`"userInfo":{"username":"system:serviceaccount:ci:deployer","uid":"sa-1","groups":["system:serviceaccounts","system:authenticated"],` +
		`"extra":{"authentication.kubernetes.io/pod-name":["runner-0"],"scopes":[]}},` +
		`"object":{"spec":{"replicas":3},"n":[-0,1.0,1e2,1E-2,-9223372036854775808,9223372036854775807,9223372036854775808,-9223372036854775809,1e-400,123456789012345678901234567890],` +
		`"s":"caf\u00e9 \ud83d\ude00 \"q\" \\","e":{},"a":[],"z":null,"t":true,"f":false},` +
		`"oldObject":{"spec":{"replicas":1}},"dryRun":true,"options":{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl"}}}`)
	once, err := decodeOnce(full)
	if err != nil {
		t.Fatalf("every field: %v", err)
	}
	assertSameRequest(t, "every field", once, full)
	if n := once.Object.Object["n"].([]any); n[0] != int64(0) || n[1] != 1.0 || n[2] != 100.0 || n[4] != int64(-9223372036854775808) ||
		n[6] != 9223372036854775808.0 || n[8] != 0.0 || once.UserInfo.Extra["scopes"] == nil || *once.DryRun != true {
		t.Fatalf("every field: decoded %+v, numbers %v", once.AdmissionRequest, n)
	}

	// What the single-parse path does not take as written goes the plain
	// way, which decides as encoding/json does: a number beyond float64 is
	// an error, a string that is not UTF-8 has the bad bytes replaced.
	for name, tc := range map[string]struct {
		object  string
		wantErr string // empty: decodes, with want as the object's "s"; an error never quotes the body
		want    string
	}{
		"number beyond float64": {object: `{"n":1e400}`, wantErr: `malformed AdmissionReview: request.object: field "": cannot decode JSON number into float64`},
		"invalid UTF-8":         {object: "{\"s\":\"a\xffb\"}", want: "a\ufffdb"},
		"lone surrogate":        {object: `{"s":"a\ud800b"}`, want: "a\ufffdb"},
	} {
		body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"object":` + tc.object + `}}`)
		if _, err := decodeOnce(body); !errors.Is(err, errTryPlain) {
			t.Fatalf("%s: decodeOnce: %v, want to leave it to the plain path", name, err)
		}
		r, err := Decode(body)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("%s: Decode: %v, want %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || r.Object.Object["s"] != tc.want {
			t.Fatalf("%s: Decode: %v, %v", name, r, err)
		}
	}

	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"Object":{"kind":"Pod"}}}`)
	if _, err := decodeOnce(body); !errors.Is(err, errTryPlain) {
		t.Fatalf("decodeOnce with request.Object: %v, want to leave it to the plain path", err)
	}
	r, err := Decode(body)
	if err != nil || r.Object == nil || r.Object.Object["kind"] != "Pod" {
		t.Fatalf("Decode with request.Object: %+v %v", r, err)
	}

	// A field admitfn's types do not have (a newer kube-apiserver's) is
	// ignored, on the plain path.
	body = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"newField":{"a":1}}}`)
	if _, err := decodeOnce(body); !errors.Is(err, errTryPlain) {
		t.Fatalf("decodeOnce with an unknown field: %v, want to leave it to the plain path", err)
	}
	if r, err := Decode(body); err != nil || r.UID != "u-1" || r.UserInfo.Username != "alice" {
		t.Fatalf("Decode with an unknown field: %+v %v", r, err)
	}

	// encoding/json merges the two userInfo objects into one struct.
	body = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + validRequest + `,"userInfo":{"uid":"u-9"}}}`)
	if _, err := decodeOnce(body); !errors.Is(err, errTryPlain) {
		t.Fatalf("decodeOnce with userInfo twice: %v, want to leave it to the plain path", err)
	}
	if r, err := Decode(body); err != nil || r.UserInfo.Username != "alice" || r.UserInfo.UID != "u-9" {
		t.Fatalf("Decode with userInfo twice: %+v %v", r, err)
	}
}

// assertSameRequest fails unless got is what decodePlain makes of body.
func assertSameRequest(t *testing.T, name string, got *Request, body []byte) {
	t.Helper()
	want, err := decodePlain(body)
	if err != nil {
		t.Fatalf("%s: the single-parse path decoded what the plain path refuses (%v)", name, err)
	}
	typed := *want.AdmissionRequest
	typed.Object, typed.OldObject, typed.Options = runtime.RawExtension{}, runtime.RawExtension{}, runtime.RawExtension{}
	if got.APIVersion != want.APIVersion || !reflect.DeepEqual(*got.AdmissionRequest, typed) ||
		!reflect.DeepEqual(got.Object, want.Object) || !reflect.DeepEqual(got.OldObject, want.OldObject) || !reflect.DeepEqual(got.Options, want.Options) {
		t.Fatalf("%s: decoding paths differ:\n once:  %+v\n plain: %+v", name, got, want)
	}
}

// A decoded request holds no reference to the body, on either path: the
// HTTP handler reads bodies into buffers it reuses for the next review.
func TestDecodedRequestOwnsItsData(t *testing.T) {
	files, err := filepath.Glob("../../adapters/httpadapter/testdata/*.request.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d golden requests: %v", len(files), err)
	}
	var bodies [][]byte
	for _, f := range append(files, "../../test/perf/testdata/pod-review.json") {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	// The plain path: a field name in another case, an unknown field.
	bodies = append(bodies,
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`+validRequest+`,"Object":{"kind":"Pod","metadata":{"name":"p"}}}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":`+validRequest+`,"newField":{"a":1},"object":{"kind":"Pod","data":{"k":"djE="}}}}`))
	for i, pristine := range bodies {
		body := bytes.Clone(pristine)
		got, err := Decode(body)
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		for j := range body {
			body[j] = 'x'
		}
		want, err := Decode(pristine)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("body %d: the decoded request changed with its body:\n got:  %+v\n want: %+v", i, got, want)
		}
	}
}
