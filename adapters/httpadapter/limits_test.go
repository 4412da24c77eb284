package httpadapter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
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
		"count":       {Limits{Reviews: 2}, []int{1000, 1000}, 1000, false},
		"count, room": {Limits{Reviews: 2}, []int{1000}, 1000, true},
		"bytes":       {Limits{Bytes: 10000}, []int{6000}, 6000, false},
		"bytes, room": {Limits{Bytes: 10000}, []int{6000}, 4000, true},
		// A body of unknown length takes what arrives, not the most it
		// could be.
		"unknown length":          {Limits{Bytes: 10000}, []int{6000}, -1, true},
		"unknown length, no room": {Limits{Bytes: 10000}, []int{9900}, -1, false},
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

// counting is an engine that allows every review, and counts them.
func counting() (fakeEngine, *atomic.Int32) {
	n := &atomic.Int32{}
	return fakeEngine{review: func(ctx context.Context, r policy.Route, req *review.Request) (*engine.Result, error) {
		n.Add(1)
		return allowAll(ctx, r, req)
	}}, n
}

// A body that is still arriving at the deadline ends the review with a 504:
// the request is neither decoded nor reviewed after its caller gave up.
func TestBodyReadStopsAtTheDeadline(t *testing.T) {
	eng, reviewed := counting()
	h := New(eng, zerolog.Nop())
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

// trickle opens a connection to addr and sends a review request's headers,
// declaring a body of declared bytes, and the first sent bytes of it.
func trickle(t *testing.T, addr string, declared, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /validate?timeout=30s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", declared, strings.Repeat(" ", sent))
	return c
}

// answer reads the response on c.
func answer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(patience))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Callers that open reviews and send their bodies slowly, or not at all,
// hold no place a complete review needs: with three times as many of them
// as review places, a complete review is answered.
func TestSlowBodiesHoldNoPlace(t *testing.T) {
	eng, reviewed := counting()
	h := New(eng, zerolog.Nop(), WithLimits(Limits{Reviews: 2, Bytes: 64 << 10, BodyIdle: time.Minute, MinBodyRate: 1}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for range 6 {
		// Closed before the server is: Close waits for their requests.
		defer trickle(t, addr, 1000, 100).Close()
	}
	for range 2 {
		resp, err := http.Post(srv.URL+"/validate?timeout=10s", "application/json", strings.NewReader(secretReview("admission.k8s.io/v1")))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"allowed":true`) {
			t.Fatalf("a complete review beside slow ones: %d %s", resp.StatusCode, body)
		}
	}
	if n := reviewed.Load(); n != 2 {
		t.Fatalf("%d reviews evaluated, want the 2 complete ones", n)
	}
}

// A body that stops arriving ends its request with 408 after BodyIdle, long
// before the review's deadline; one that keeps trickling below the minimum
// rate ends too. Neither is evaluated, and the connection closes.
func TestSlowBodiesEnd(t *testing.T) {
	eng, reviewed := counting()
	h := New(eng, zerolog.Nop(), WithLimits(Limits{BodyIdle: 200 * time.Millisecond, MinBodyRate: 1000}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	stalled := trickle(t, addr, 5000, 10)
	code, body := answer(t, stalled)
	const idle = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"request body stopped arriving: no byte for 200ms","reason":"Timeout","code":408}`
	if code != http.StatusRequestTimeout || body != idle {
		t.Fatalf("a stalled body: %d %s", code, body)
	}

	slow := trickle(t, addr, 5000, 10)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for range 100 { // at most 10 s of trickle, 100 bytes a second
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := slow.Write([]byte("          ")); err != nil {
					return
				}
			}
		}
	}()
	code, body = answer(t, slow)
	const tooSlow = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"request body arrives too slowly: under 1000 bytes a second","reason":"Timeout","code":408}`
	if code != http.StatusRequestTimeout || body != tooSlow {
		t.Fatalf("a trickling body: %d %s", code, body)
	}
	for _, c := range []net.Conn{stalled, slow} {
		c.SetReadDeadline(time.Now().Add(patience))
		// Closed: EOF, or a reset when the trickle's bytes reached a
		// socket the server had closed with them unread.
		if _, err := c.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection left open after a slow body: %v", err)
		}
	}
	if reviewed.Load() != 0 {
		t.Fatalf("%d slow bodies evaluated", reviewed.Load())
	}
}

// waitBytes waits until h holds n bytes of its body budget.
func waitBytes(t *testing.T, h *Handler, n int64) {
	t.Helper()
	for end := time.Now().Add(patience); ; time.Sleep(time.Millisecond) {
		h.inFlight.mu.Lock()
		held := h.inFlight.bytes
		h.inFlight.mu.Unlock()
		if held == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d bytes of the body budget taken, want %d", held, n)
		}
	}
}

// The body budget counts bytes received: a body whose bytes would cross it
// is shed with 429 as they arrive, and its bytes go back.
func TestBodyBudgetCountsBytesReceived(t *testing.T) {
	h := New(fakeEngine{review: allowAll}, zerolog.Nop(), WithLimits(Limits{Bytes: 10000, BodyIdle: time.Minute, MinBodyRate: 1}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	held := trickle(t, addr, 20000, 6000)
	// The 6000 bytes are taken once the handler has read them: a body of
	// 5000 then finds no room.
	waitBytes(t, h, 6000)
	big := trickle(t, addr, 5000, 5000)
	if code, body := answer(t, big); code != 429 || body != shed {
		t.Fatalf("a body beyond the budget: %d %s", code, body)
	}
	held.Close()
	// Every byte goes back once the requests end.
	waitBytes(t, h, 0)
}
