package review

import (
	"encoding/json"
	"os"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// FuzzDecode: any body decodes to a request or a malformed error, never a
// panic; a decoded request can always be answered; what the single-parse
// path decodes, the plain path decodes the same.
func FuzzDecode(f *testing.F) {
	b, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{"a":[1,2.5,"x",null,{"b":true}]}}}`))
	f.Add([]byte(`[[[[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if once, err := decodeOnce(body); err == nil {
			assertSameRequest(t, "fuzzed body", once, body)
		}
		req, err := Decode(body)
		if err != nil {
			if req != nil {
				t.Fatal("a request and an error")
			}
			return
		}
		out, err := Encode(req.APIVersion, &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true})
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var back struct {
			Response struct{ UID string }
		}
		if err := json.Unmarshal(out, &back); err != nil || back.Response.UID != string(req.UID) {
			t.Fatalf("answer %s: %v", out, err)
		}
	})
}
