package httpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/cluster/clustertest"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
)

const prodOnlyPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-prod-secrets}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}]
  validations:
  - expression: "namespaceObject.metadata.?labels.env.orValue('') != 'prod'"
    message: no secrets by hand in prod namespaces
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-prod-secrets}
spec: {policyName: no-prod-secrets, validationActions: [Deny]}
`

func namespaceCluster(name, env string) *clustertest.Cluster {
	return &clustertest.Cluster{Static: cluster.Static{ClusterName: name, Namespaces: map[string]*corev1.Namespace{
		"default": {ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": env}}},
	}}}
}

// Each cluster's URL is answered from that cluster; a path naming a
// cluster the function does not serve is a bare 404 that reads nothing
// and labels nothing.
func TestClusterURLs(t *testing.T) {
	b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(prodOnlyPolicy)}})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(b, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	eu, us := namespaceCluster("eu", "prod"), namespaceCluster("us", "dev")
	down := namespaceCluster("down", "dev")
	down.Err = errors.New("cluster unavailable: dial tcp 10.9.9.9:443: connect: connection refused")
	rec := &recorder{}
	var logs bytes.Buffer
	h := New(eng, zerolog.New(&logs), WithMetrics(rec), WithClusters(map[string]cluster.Reader{"eu": eu, "us": us, "down": down, "edge": nil}))

	type answer struct {
		code    int
		allowed bool
		message string
	}
	post := func(path string) answer {
		got := serve(t, h, exchange{method: "POST", path: path, contentType: "application/json", body: secretReview("admission.k8s.io/v1")})
		if got.Code != http.StatusOK {
			code, _, message := statusBody(t, got)
			return answer{code: code, message: message}
		}
		var out struct {
			Response struct {
				Allowed bool
				Status  *struct{ Message string }
			}
		}
		if err := json.Unmarshal(got.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		a := answer{code: 200, allowed: out.Response.Allowed}
		if out.Response.Status != nil {
			a.message = out.Response.Status.Message
		}
		return a
	}
	cases := []struct {
		path string
		want answer
	}{
		{"/clusters/eu/validate", answer{200, false, "ValidatingAdmissionPolicy 'no-prod-secrets' with binding 'no-prod-secrets' denied request: no secrets by hand in prod namespaces"}},
		{"/clusters/us/validate", answer{200, true, ""}},
		{"/clusters/down/validate", answer{200, false, `ValidatingAdmissionPolicy 'no-prod-secrets' with binding 'no-prod-secrets' denied request: namespaceObject: cannot read namespace "default" from cluster "down": cluster unavailable: dial tcp 10.9.9.9:443: connect: connection refused`}},
		// Served without access: namespaceObject holds the name only.
		{"/clusters/edge/validate", answer{200, true, ""}},
		{"/validate", answer{200, true, ""}},
		{"/clusters/mars/validate", answer{404, false, "not found"}},
		{"/clusters//validate", answer{404, false, "not found"}},
	}
	for _, tc := range cases {
		if got := post(tc.path); got != tc.want {
			t.Errorf("%s: %+v\nwant %+v", tc.path, got, tc.want)
		}
	}
	if eu.Reads != 1 || us.Reads != 1 {
		t.Errorf("reads: eu %d, us %d; want one each", eu.Reads, us.Reads)
	}
	if strings.Contains(logs.String(), "mars") || rec.rejected != 2 {
		t.Errorf("unknown cluster: logged %v, rejected %d; want never logged, two rejections\n%s", strings.Contains(logs.String(), "mars"), rec.rejected, logs.String())
	}
	if !strings.Contains(logs.String(), `"cluster":"eu"`) || !strings.Contains(logs.String(), `"cluster_read_errors":1`) {
		t.Errorf("review lines lack the cluster or its read errors:\n%s", logs.String())
	}
	var got []string
	for _, r := range rec.reviews {
		got = append(got, r.Cluster+" "+r.Decision+" "+string(rune('0'+r.ClusterReadErrors)))
	}
	want := []string{"eu denied 0", "us allowed 0", "down denied 1", "edge allowed 0", " allowed 0"}
	for _, r := range rec.reviews {
		if r.Idle {
			t.Errorf("review %+v is idle: the policy matched every one", r)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics %q\nwant %q", got, want)
	}
}

// A review no binding acts on is logged and counted as idle.
func TestIdleReviewIsLoggedAndCounted(t *testing.T) {
	b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(prodOnlyPolicy)}})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(b, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var logs bytes.Buffer
	h := New(eng, zerolog.New(&logs), WithMetrics(rec))
	// A Secret update: the policy matches creates only.
	body := strings.Replace(secretReview("admission.k8s.io/v1"), `"operation":"CREATE"`, `"operation":"UPDATE"`, 1)
	if got := serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: body}); got.Code != http.StatusOK {
		t.Fatalf("HTTP %d %s", got.Code, got.Body)
	}
	if len(rec.reviews) != 1 || !rec.reviews[0].Idle || !strings.Contains(logs.String(), `"idle":true`) {
		t.Errorf("reviews %+v, logs:\n%s", rec.reviews, logs.String())
	}
}
