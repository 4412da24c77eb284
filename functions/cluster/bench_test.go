package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/admitfn/admitfn/core/celeval"
	corecluster "github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/validate"
)

// apiServer answers what a Reader asks: namespace "shop" and
// SubjectAccessReviews (allowed for group sre). It counts the requests.
type apiServer struct {
	*httptest.Server
	requests atomic.Int64
}

func newAPIServer(t testing.TB) *apiServer {
	a := &apiServer{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"):
			name := strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/")
			json.NewEncoder(w).Encode(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "prod", "kubernetes.io/metadata.name": name}, Annotations: map[string]string{"owner": "team-a"}}})
		case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			json.NewDecoder(r.Body).Decode(&sar)
			for _, g := range sar.Spec.Groups {
				sar.Status.Allowed = sar.Status.Allowed || g == "sre"
			}
			sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
			json.NewEncoder(w).Encode(&sar)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func benchReader(t testing.TB, a *apiServer) *Reader {
	// JSON: the stand-in decodes nothing else.
	r, err := NewReader(Cluster{Name: "bench"}, &rest.Config{Host: a.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// clusterPolicy reads namespaceObject and asks the authorizer; Ignore, so a
// review without cluster access (whose expressions fail) is allowed too.
const clusterPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: env}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "namespaceObject.metadata.labels.env != 'prod' || object.spec.replicas >= 2"
    message: prod needs 2 replicas
  - expression: "object.metadata.?labels.tier.orValue('') != 'critical' || authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('break-glass').allowed()"
    message: critical deployments need the break-glass verb
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: env}
spec: {policyName: env, validationActions: [Deny]}
`

func benchEngine(t testing.TB) (*engine.Engine, policy.Route) {
	b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(clusterPolicy)}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(b, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	return e, e.Groups()[0].Route()
}

func deploymentReview(t testing.TB, namespace string) *review.Request {
	body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"operation":"CREATE","namespace":%q,"name":"web","userInfo":{"username":"alice","groups":["sre","system:authenticated"]},"object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":%q,"labels":{"tier":"critical"}},"spec":{"replicas":2}}}}`, namespace, namespace)
	req, err := review.Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// BenchmarkP9ClusterReview is a review whose policies read namespaceObject
// and ask the authorizer, answered from warm caches, and the same review
// on a URL without cluster access (docs/performance.md, P9).
func BenchmarkP9ClusterReview(b *testing.B) {
	e, rt := benchEngine(b)
	api := newAPIServer(b)
	reader := benchReader(b, api)
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"without-cluster", context.Background()},
		{"with-cluster", corecluster.NewContext(context.Background(), reader)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := deploymentReview(b, "shop")
			res, err := e.Review(tc.ctx, rt, req)
			if err != nil || !res.Response.Allowed {
				b.Fatalf("%v %+v", err, res)
			}
			before := api.requests.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := e.Review(tc.ctx, rt, deploymentReview(b, "shop")); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if n := api.requests.Load() - before; n > int64(b.N)/100+2 {
				b.Fatalf("%d requests to the cluster for %d reviews: the caches are not warm", n, b.N)
			}
		})
	}
}

// A hundred reviews of one namespace nobody has read yet make one request
// to the cluster.
func TestConcurrentReviewsOfANamespaceMakeOneRequest(t *testing.T) {
	e, rt := benchEngine(t)
	api := newAPIServer(t)
	reader := benchReader(t, api)
	ctx := corecluster.NewContext(context.Background(), reader)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Review(ctx, rt, deploymentReview(t, "uncached"))
			if err != nil || !res.Response.Allowed || len(res.FailedPolicies) != 0 {
				errs <- fmt.Errorf("%v %+v", err, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One namespace read, and one SubjectAccessReview: the same user and
	// attributes in every review.
	if n := api.requests.Load(); n != 2 {
		t.Errorf("%d requests to the cluster, want 2 (one namespace, one SubjectAccessReview)", n)
	}
}

// When a cluster already has maxInFlight reads out (here one, stuck), a
// review that needs another is not queued: its policy fails at once with
// a message that says so, and the failurePolicy (Ignore here) decides.
func TestTooManyReadsFailThePolicyAtOnce(t *testing.T) {
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer stuck.Close()
	defer close(release)
	reader, err := NewReader(Cluster{Name: "stuck", MaxInFlight: 1}, &rest.Config{Host: stuck.URL})
	if err != nil {
		t.Fatal(err)
	}
	e, rt := benchEngine(t)
	ctx := corecluster.NewContext(context.Background(), reader)
	first, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := e.Review(first, rt, deploymentReview(t, "one")); err == nil {
		t.Fatal("the first review answered past its deadline")
	}
	// The first read is still out: the second review's is refused.
	ctx, tr := validate.WithReport(ctx)
	res, err := e.Review(ctx, rt, deploymentReview(t, "two"))
	if err != nil {
		t.Fatal(err)
	}
	var messages []string
	for _, ev := range tr.Evaluations {
		messages = append(messages, ev.Message)
	}
	want := `namespaceObject: cannot read namespace "two" from cluster "stuck": cluster unavailable: too many reads of the cluster in flight`
	if !res.Response.Allowed || len(messages) == 0 || messages[0] != want || reader.Stats().Counts().Errors < 2 {
		t.Errorf("allowed %v, evaluations %q, counts %+v\nwant allowed (Ignore), first %q", res.Response.Allowed, messages, reader.Stats().Counts(), want)
	}
}

// A namespace name no namespace can have (a caller's made-up review) is
// not found without asking the cluster.
func TestImpossibleNamespaceIsNotRead(t *testing.T) {
	api := newAPIServer(t)
	reader := benchReader(t, api)
	for _, name := range []string{"Not/A/Name", strings.Repeat("a", 64), ""} {
		if _, err := reader.Namespace(context.Background(), name); !apierrors.IsNotFound(err) {
			t.Errorf("%q: %v, want NotFound", name, err)
		}
	}
	if n := api.requests.Load(); n != 0 {
		t.Errorf("%d requests to the cluster, want none", n)
	}
}
