package httpadapter

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// patience is the safety net of waits in these tests, never what they assert.
const patience = 2 * time.Minute

// blocking is an engine whose reviews wait for release, counting those
// under way.
type blocking struct {
	fakeEngine
	in      atomic.Int32
	release chan struct{}
}

func newBlocking() *blocking {
	b := &blocking{release: make(chan struct{})}
	b.review = func(ctx context.Context, _ policy.Route, req *review.Request) (*engine.Result, error) {
		b.in.Add(1)
		<-b.release
		return allowAll(ctx, policy.Route{}, req)
	}
	return b
}

func (b *blocking) waitIn(t *testing.T, n int32) {
	t.Helper()
	for end := time.Now().Add(patience); b.in.Load() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d reviews under way, want %d", b.in.Load(), n)
		}
	}
}

// send serves a review whose body is padded to size bytes; size < 0 sends
// it without a length, as a chunked body arrives.
func send(h http.Handler, size int) *httptest.ResponseRecorder {
	body := secretReview("admission.k8s.io/v1")
	if size > len(body) {
		body = body[:len(body)-1] + strings.Repeat(" ", size-len(body)) + "}"
	}
	req := httptest.NewRequest("POST", "/validate?timeout=10s", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if size < 0 {
		req.ContentLength = -1
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

const shed = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too many reviews in flight: retry later","reason":"TooManyRequests","code":429}`

func TestShedsReviewsBeyondTheLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		limits Limits
		held   []int // sizes of the reviews under way
		next   int
		fits   bool
	}{
		"count":               {Limits{Reviews: 2}, []int{1000, 1000}, 1000, false},
		"count, room":         {Limits{Reviews: 2}, []int{1000}, 1000, true},
		"bytes":               {Limits{Bytes: 10000}, []int{6000}, 6000, false},
		"bytes, room":         {Limits{Bytes: 10000}, []int{6000}, 4000, true},
		"unknown length":      {Limits{Bytes: MaxBodyBytes}, []int{1000}, -1, false},
		"unknown length fits": {Limits{Bytes: MaxBodyBytes}, nil, -1, true},
	} {
		t.Run(name, func(t *testing.T) {
			eng := newBlocking()
			h := New(eng, zerolog.Nop(), WithLimits(tc.limits))
			done := make(chan *httptest.ResponseRecorder, len(tc.held))
			for _, size := range tc.held {
				go func() { done <- send(h, size) }()
			}
			eng.waitIn(t, int32(len(tc.held)))
			if !tc.fits {
				w := send(h, tc.next)
				if w.Code != 429 || w.Header().Get("Retry-After") != "1" || w.Body.String() != shed || eng.in.Load() != int32(len(tc.held)) {
					t.Fatalf("beyond the limits: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
				}
				close(eng.release)
			} else {
				go func() { done <- send(h, tc.next) }()
				eng.waitIn(t, int32(len(tc.held)+1))
				close(eng.release)
				if w := <-done; w.Code != 200 {
					t.Fatalf("within the limits: %d %s", w.Code, w.Body)
				}
			}
			for range tc.held {
				if w := <-done; w.Code != 200 {
					t.Fatalf("a review under way: %d %s", w.Code, w.Body)
				}
			}
			// All released: the next one fits again.
			if w := send(h, 1000); w.Code != 200 {
				t.Fatalf("after release: %d %s", w.Code, w.Body)
			}
		})
	}
	if l := LimitsFor(256 << 20); l.Bytes != 16<<20 || l.Reviews < 16 {
		t.Errorf("limits for 256 MiB: %+v", l)
	}
	if l := LimitsFor(64 << 20); l.Bytes != MaxBodyBytes {
		t.Errorf("limits for 64 MiB: %+v, want room for one review of the largest size", l)
	}
}

// A body that is still arriving at the deadline ends the review with a 504:
// the request is neither decoded nor reviewed after its caller gave up.
func TestBodyReadStopsAtTheDeadline(t *testing.T) {
	reviewed := atomic.Int32{}
	h := New(fakeEngine{review: func(ctx context.Context, r policy.Route, req *review.Request) (*engine.Result, error) {
		reviewed.Add(1)
		return allowAll(ctx, r, req)
	}}, zerolog.Nop())
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /validate?timeout=1s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"apiVersion\":")
	c.SetReadDeadline(time.Now().Add(patience))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"review did not finish before the deadline: the request body was still arriving","reason":"Timeout","code":504}`
	if resp.StatusCode != 504 || string(body) != want || reviewed.Load() != 0 {
		t.Fatalf("%d %s, %d reviewed", resp.StatusCode, body, reviewed.Load())
	}
}

// A request whose deadline passed while it was read is not decoded.
func TestNoDecodingPastTheDeadline(t *testing.T) {
	h := New(fakeEngine{review: func(context.Context, policy.Route, *review.Request) (*engine.Result, error) {
		t.Error("reviewed past the deadline")
		return nil, nil
	}}, zerolog.Nop())
	req := httptest.NewRequest("POST", "/validate?timeout=1ns", strings.NewReader(secretReview("admission.k8s.io/v1")))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 504 || !strings.Contains(w.Body.String(), `"message":"review did not finish before the deadline: the request body arrived too late"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// Without ?timeout= (kube-apiserver always sends it; other callers may
// not), a review gets the webhook maximum, 30s, less the margin.
func TestDefaultDeadline(t *testing.T) {
	var got time.Time
	h := New(fakeEngine{review: func(ctx context.Context, r policy.Route, req *review.Request) (*engine.Result, error) {
		got, _ = ctx.Deadline()
		return allowAll(ctx, r, req)
	}}, zerolog.Nop())
	req := httptest.NewRequest("POST", "/validate", strings.NewReader(secretReview("admission.k8s.io/v1")))
	req.Header.Set("Content-Type", "application/json")
	before := time.Now()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	after := time.Now()
	const want = 27 * time.Second // 30s less a tenth
	if w.Code != 200 || got.Before(before.Add(want)) || got.After(after.Add(want)) {
		t.Fatalf("%d, deadline %v after the request, want %v", w.Code, got.Sub(before), want)
	}
}
