package storetest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what a Proxy does to requests.
type Fault int32

const (
	// Pass forwards requests untouched.
	Pass Fault = iota
	// Fail500 answers every request with HTTP 500.
	Fail500
	// Slow holds every request for the proxy's Delay, then forwards it.
	Slow
)

// Proxy is a fault-injecting reverse proxy on 127.0.0.1 in front of a
// store server.
type Proxy struct {
	URL   string
	Host  string
	fault atomic.Int32
	// Delay is how long Slow holds a request.
	Delay    time.Duration
	requests atomic.Int64
}

// NewProxy starts a proxy to target (http://host:port). With rewriteHost,
// requests reach the target addressed to it rather than to the proxy:
// fake-gcs-server tells its XML API from its JSON API by the Host; an S3
// server must see the Host the client signed.
func NewProxy(t testing.TB, target string, rewriteHost bool) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Delay: 10 * time.Second}
	rp := httputil.NewSingleHostReverseProxy(u)
	if rewriteHost {
		direct := rp.Director
		rp.Director = func(r *http.Request) {
			direct(r)
			r.Host = u.Host
		}
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // a stopped target is the test's doing
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		switch Fault(p.fault.Load()) {
		case Fail500:
			http.Error(w, "injected fault", http.StatusInternalServerError)
			return
		case Slow:
			select {
			case <-time.After(p.Delay):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.Host = srv.Listener.Addr().String()
	return p
}

// Set changes the fault from now on.
func (p *Proxy) Set(f Fault) { p.fault.Store(int32(f)) }

// Requests counts the requests the proxy has received.
func (p *Proxy) Requests() int64 { return p.requests.Load() }
