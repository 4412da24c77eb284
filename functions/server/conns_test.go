package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// held opens n connections to addr: idle keep-alives that made one request,
// or (idle false) connections that never send a byte.
func held(t *testing.T, addr string, n int, idle bool) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if idle {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		conns = append(conns, c)
	}
	return conns
}

// eventually polls cond with the test's patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(patience); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, patience)
		}
	}
}

// inState counts l's open connections in state s.
func inState(l *connLimit, s http.ConnState) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.open {
		if c.state == s {
			n++
		}
	}
	return n
}

// Connections beyond the cap close the longest-waiting idle or silent one:
// held connections (4,086 of them starved a review) cannot keep a review
// out, and the server never holds more than the cap.
func TestConnectionCap(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max = 8
	ln := limitConns(tcp, max)
	release := make(chan struct{})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/busy" {
				<-release
			}
			io.WriteString(w, "ok")
		}),
		ReadHeaderTimeout: time.Hour, // only the cap closes connections here
		IdleTimeout:       time.Hour,
		ConnState:         ln.ConnState,
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := tcp.Addr().String()

	held(t, addr, max, true)
	// The server marks a connection idle after its client has the answer.
	eventually(t, "idle connections", func() bool { return inState(ln, http.StateIdle) == max })
	silent := held(t, addr, 2*max, false)
	eventually(t, "evictions", func() bool { return ln.evicted.Load() == 2*max })
	if n := ln.Open(); n != max {
		t.Fatalf("%d connections open, cap %d", n, max)
	}
	// The oldest silent ones went after the idle ones.
	for i, c := range silent[:max] {
		c.SetReadDeadline(time.Now().Add(patience))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("silent connection %d: %v, want closed", i, err)
		}
	}
	once := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := once.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a request at the cap: %v %v", resp, err)
	}
	resp.Body.Close()
	// Its connection closes, so the oldest silent ones are what the busy
	// ones below evict (an idle one could turn idle after a busy one is
	// accepted, and the busy one, not yet read, would be the older).
	eventually(t, "the request's connection closed", func() bool { return ln.Open() == max-1 })

	// When every connection is busy, a new one is refused, not queued. Each
	// busy request has its own connection: a pooling client could dial one
	// it then leaves unused (new, so evictable) while a pooled one serves.
	for range max {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	eventually(t, "busy connections", func() bool { return inState(ln, http.StateActive) == max })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(patience))
	if _, err := c.Read(make([]byte, 1)); err == nil || ln.refused.Load() != 1 {
		t.Fatalf("a connection beyond busy ones: %v, %d refused", err, ln.refused.Load())
	}
	close(release)
}

// The server applies the cap from ADMITFN_MAX_CONNECTIONS: a review gets
// through while four times the cap are held.
func TestServerConnectionCap(t *testing.T) {
	addr, _ := start(t, []string{"-addr", "127.0.0.1:0", "-policies", examples}, map[string]string{"ADMITFN_MAX_CONNECTIONS": "4"})
	held(t, addr, 8, true)
	held(t, addr, 8, false)
	body, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/validate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(got), `"allowed":false`) {
		t.Fatalf("review at the cap: %d %s", resp.StatusCode, got)
	}
	if _, err := parseConfig([]string{"-max-connections", "0"}, func(string) string { return "" }, io.Discard); err == nil || err.Error() != "-max-connections must be at least 1, not 0" {
		t.Errorf("-max-connections 0: %v", err)
	}
}
