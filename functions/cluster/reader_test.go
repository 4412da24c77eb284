package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"

	"github.com/admitfn/admitfn/core/cluster"
)

// fakeCluster serves what a Reader asks of a cluster whose state a test
// changes: namespaces that exist, kinds discovery knows (ConfigMap always,
// Quota once quota is set). It counts requests.
type fakeCluster struct {
	*httptest.Server
	namespaces atomic.Value // map[string]bool
	quota      atomic.Bool
	requests   atomic.Int64
	// answer, when set, answers every request (a failing cluster).
	answer func(w http.ResponseWriter)
}

func newFakeCluster(t *testing.T) *fakeCluster {
	f := &fakeCluster{}
	f.namespaces.Store(map[string]bool{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if f.answer != nil {
			f.answer(w)
			return
		}
		enc := json.NewEncoder(w)
		switch p := r.URL.Path; {
		case p == "/api":
			enc.Encode(metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		case p == "/api/v1":
			enc.Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1", APIResources: []metav1.APIResource{
				{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"get", "list"}},
				{Name: "namespaces", Kind: "Namespace", Verbs: []string{"get"}},
			}})
		case p == "/apis":
			groups := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
			if f.quota.Load() {
				gv := metav1.GroupVersionForDiscovery{GroupVersion: "late.admitfn.io/v1", Version: "v1"}
				groups.Groups = append(groups.Groups, metav1.APIGroup{Name: "late.admitfn.io", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
			}
			enc.Encode(groups)
		case p == "/apis/late.admitfn.io/v1" && f.quota.Load():
			enc.Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "late.admitfn.io/v1", APIResources: []metav1.APIResource{
				{Name: "quotas", Kind: "Quota", Namespaced: true, Verbs: []string{"get", "list"}},
			}})
		case strings.HasPrefix(p, "/api/v1/namespaces/") && !strings.Contains(strings.TrimPrefix(p, "/api/v1/namespaces/"), "/"):
			name := strings.TrimPrefix(p, "/api/v1/namespaces/")
			if !f.namespaces.Load().(map[string]bool)[name] {
				w.WriteHeader(http.StatusNotFound)
				enc.Encode(apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name).ErrStatus)
				return
			}
			enc.Encode(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}})
		default:
			w.WriteHeader(http.StatusNotFound)
			enc.Encode(apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, p).ErrStatus)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeCluster) reader(t *testing.T) *Reader {
	r, err := NewReader(Cluster{Name: "fake"}, &rest.Config{Host: f.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Finding: a review naming a namespace about to be created cached "not
// found" for the cache's age, so real reviews in it failed meanwhile.
// kube-apiserver reads a namespace its informer has not seen live; so does
// the reader, on every miss, never keeping the NotFound.
func TestANamespaceCreatedAfterAMissIsFound(t *testing.T) {
	f := newFakeCluster(t)
	r := f.reader(t)
	ctx := context.Background()
	if _, err := r.Namespace(ctx, "late"); !apierrors.IsNotFound(err) {
		t.Fatalf("before it exists: %v, want NotFound", err)
	}
	f.namespaces.Store(map[string]bool{"late": true})
	ns, err := r.Namespace(ctx, "late")
	if err != nil || ns.Name != "late" {
		t.Fatalf("once created: %v %v", ns, err)
	}
	// Found, it is cached as before.
	before := f.requests.Load()
	if _, err := r.Namespace(ctx, "late"); err != nil || f.requests.Load() != before {
		t.Errorf("a found namespace was read again: %v, %d requests", err, f.requests.Load()-before)
	}
}

// Finding: a param kind whose CRD appeared after the function's first
// discovery was never found until a restart. A kind discovery does not
// know reads discovery again, at most every rediscoverEvery.
func TestAParamKindCreatedAfterStartIsFound(t *testing.T) {
	f := newFakeCluster(t)
	r := f.reader(t)
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	ctx := context.Background()
	quota := schema.GroupVersionKind{Group: "late.admitfn.io", Version: "v1", Kind: "Quota"}
	if _, err := r.ParamScope(ctx, quota); !errors.Is(err, cluster.ErrUnavailable) || err.Error() != "cluster unavailable: the cluster serves no kind late.admitfn.io/v1, Kind=Quota" {
		t.Fatalf("before the CRD: %v", err)
	}
	f.quota.Store(true)
	// Within rediscoverEvery of the last discovery: not read again.
	now = now.Add(rediscoverEvery / 2)
	before := f.requests.Load()
	if _, err := r.ParamScope(ctx, quota); !errors.Is(err, cluster.ErrUnavailable) || f.requests.Load() != before {
		t.Fatalf("a second unknown kind within %s read discovery again (%d requests): %v", rediscoverEvery, f.requests.Load()-before, err)
	}
	now = now.Add(rediscoverEvery)
	scope, err := r.ParamScope(ctx, quota)
	if err != nil || scope.Name() != "namespace" {
		t.Fatalf("after the CRD: %v %v", scope, err)
	}
}

// Finding: names no object can have were read for params (200 reads for
// 200 names, keys over 4 KiB never cached). They are answered not found
// without a read, as impossible namespace names already were.
func TestImpossibleParamNamesAreNotRead(t *testing.T) {
	f := newFakeCluster(t)
	r := f.reader(t)
	ctx := context.Background()
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	if _, err := r.ParamScope(ctx, cm); err != nil { // discovery, once
		t.Fatal(err)
	}
	before := f.requests.Load()
	for _, c := range []struct{ namespace, name string }{
		{"shop", "a/b"}, {"shop", ".."}, {"shop", "a%2Fb"}, {"shop", strings.Repeat("a", 254)}, {"shop", ""},
		{"Not_A_Namespace", "limits"}, {strings.Repeat("n", 64), "limits"}, {strings.Repeat("n", 5000), "limits"},
	} {
		if _, err := r.Param(ctx, cm, c.namespace, c.name); !apierrors.IsNotFound(err) {
			t.Errorf("%.20q/%.20q: %v, want NotFound", c.namespace, c.name, err)
		}
	}
	if list, err := r.Params(ctx, cm, strings.Repeat("n", 5000), nil); err != nil || len(list) != 0 {
		t.Errorf("list in an impossible namespace: %v %v", list, err)
	}
	if n := f.requests.Load() - before; n != 0 {
		t.Errorf("%d requests to the cluster, want none", n)
	}
	// A name objects can have is read.
	if _, err := r.Param(ctx, cm, "shop", "system:limits"); !apierrors.IsNotFound(err) || f.requests.Load()-before != 1 {
		t.Errorf("a possible name: %v, %d requests", err, f.requests.Load()-before)
	}
}

// Finding: userInfo of any size was copied into the SubjectAccessReviews
// sent to the cluster (2 MiB ones relayed). Over MaxUserInfoBytes, no
// kube-apiserver sent it, and nothing is asked.
func TestOversizedUserInfoIsNotSent(t *testing.T) {
	f := newFakeCluster(t)
	r := f.reader(t)
	groups := []string{strings.Repeat("g", 600<<10), strings.Repeat("h", 600<<10)}
	a := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "bob", Groups: groups}, Verb: "get", Resource: "pods", ResourceRequest: true}
	_, _, err := r.Authorize(context.Background(), a)
	want := `cannot ask cluster "fake": cluster unavailable: the request's user, groups and extra take 1228803 bytes, more than kube-apiserver reads in the request headers any identity arrives in (1048576): not sent`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("%d requests to the cluster, want none", n)
	}
}

// Info finding: denial messages carried the cluster's API URL, the
// function's identity and the API server's raw answer (an endpoint at the
// configured address that echoes request headers would put the bearer
// token in an answer). A read's error now says its class; the detail goes
// to the log.
func TestReadErrorsCarryNoURLIdentityOrBody(t *testing.T) {
	const echoed = "Authorization: Bearer s3cr3t-token system:serviceaccount:admitfn:admitfn-reader"
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   string
	}{
		{"403", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonForbidden, Code: 403, Message: echoed})
		}, "cluster unavailable: the function's credentials may not read this (403)"},
		{"500", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(echoed))
		}, "cluster unavailable: the cluster answered HTTP 500"},
		{"401", func(w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized); w.Write([]byte(echoed)) }, "cluster unavailable: the cluster refused the function's credentials (401)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.answer = c.answer
			r := f.reader(t)
			var logs strings.Builder
			r.SetLog(zerologTo(&logs))
			_, err := r.Namespace(context.Background(), "shop")
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v\nwant %s", err, c.want)
			}
			if !strings.Contains(logs.String(), `"cluster":"fake","read":"namespace shop","error":"`) || !strings.Contains(logs.String(), `"message":"cluster read failed"`) || strings.Contains(logs.String(), "s3cr3t") {
				t.Errorf("the log lacks the detail, or holds the token:\n%s", logs.String())
			}
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, err := NewReader(Cluster{Name: "down"}, &rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Namespace(context.Background(), "shop"); err == nil || err.Error() != "cluster unavailable: the cluster could not be reached" {
		t.Errorf("closed port: %v", err)
	}
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	r, err = NewReader(Cluster{Name: "untrusted"}, &rest.Config{Host: tlsServer.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Namespace(context.Background(), "shop"); err == nil || err.Error() != "cluster unavailable: the cluster's certificate does not verify" {
		t.Errorf("a certificate no CA of the reader signed: %v", err)
	}
}

func zerologTo(w io.Writer) zerolog.Logger { return zerolog.New(w) }
