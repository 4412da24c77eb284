package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/syncbuf"
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
	addr, _ := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples}, map[string]string{"ADMITFN_MAX_CONNECTIONS": "4"})
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
	if _, err := parseConfig([]string{"--max-connections", "0"}, func(string) string { return "" }, io.Discard); err == nil || err.Error() != "--max-connections must be at least 1, not 0" {
		t.Errorf("--max-connections 0: %v", err)
	}
}

// The cap leaves the rest of the descriptor limit to everything else, and
// is lowered, with a warning, when it was asked for above that.
func TestConnectionCapFitsTheDescriptorLimit(t *testing.T) {
	for _, tc := range []struct {
		requested int
		asked     bool
		nofile    uint64
		want      int
		warning   string
	}{
		{1000, false, 1 << 20, 1000, ""},
		{1000, false, 1024, 896, ""},
		{1000, true, 1024, 896, "--max-connections 1000 is more than the file-descriptor limit (1024) leaves for connections: serving at most 896"},
		{50, true, 128, 50, ""},
		{1000, false, 128, 96, ""},
		{1000, false, 0, 1000, ""},
	} {
		got, warning, err := connCap(tc.requested, tc.asked, tc.nofile)
		if err != nil || got != tc.want || warning != tc.warning {
			t.Errorf("connCap(%d, %v, %d) = %d, %q, %v; want %d, %q", tc.requested, tc.asked, tc.nofile, got, warning, err, tc.want, tc.warning)
		}
	}
	if _, _, err := connCap(1000, false, 32); err == nil || err.Error() != "the file-descriptor limit (32) leaves no room for connections: raise it (ulimit -n) above 32" {
		t.Errorf("limit 32: %v", err)
	}
}

// startLimited runs the server binary under a descriptor limit of nofile
// and returns its address once it serves, and its log.
func startLimited(t *testing.T, nofile int, args ...string) (string, *syncbuf.Buffer) {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) is needed: %v", err)
	}
	n := strconv.Itoa(nofile)
	cmd := exec.Command(prlimit, append([]string{"--nofile=" + n + ":" + n, "--", serverBinary(t), "--addr", "127.0.0.1:0", "--policies", examples}, args...)...)
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var serving struct{ Addr string }
	eventually(t, "serving", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"message":"serving"`) {
				return json.Unmarshal([]byte(l), &serving) == nil
			}
		}
		return false
	})
	return serving.Addr, logs
}

// Under a descriptor limit of 128, the server caps connections at 96 and
// says so; four times the limit in held connections cannot keep a review
// out, and accept never runs out of descriptors.
func TestServerUnderALowDescriptorLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	addr, logs := startLimited(t, 128)
	if !strings.Contains(logs.String(), `"max_connections":96,"fd_limit":128`) {
		t.Fatalf("the serving line does not give the cap and the limit:\n%s", logs)
	}
	held(t, addr, 256, true)
	held(t, addr, 256, false)
	client := &http.Client{Timeout: patience, Transport: &http.Transport{DisableKeepAlives: true}}
	if code, err := post(t, client, "http://"+addr+"/validate?timeout=10s", review(t)); err != nil || code != 200 {
		t.Fatalf("a review beside 512 held connections: %d %v\n%s", code, err, logs)
	}
	if strings.Contains(logs.String(), "too many open files") {
		t.Fatalf("the server ran out of descriptors:\n%s", logs)
	}

	// A cap asked for above what the limit leaves is lowered, with a
	// warning.
	_, logs = startLimited(t, 128, "--max-connections", "1000")
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"message":"--max-connections 1000 is more than the file-descriptor limit (128) leaves for connections: serving at most 96"`) {
			line = l
		}
	}
	if !strings.HasPrefix(line, `{"level":"warn","fd_limit":128,"max_connections":96,`) {
		t.Fatalf("no warning that the cap was lowered in:\n%s", logs)
	}
}

// Over HTTP/2 (kube-apiserver's protocol to an HTTPS webhook) a stream whose
// body stops arriving ends with 408 after the handler's idle limit, as on
// HTTP/1; and while more such streams than review places are open on one
// connection, a complete review on the same connection is answered.
func TestSlowBodiesOverHTTP2(t *testing.T) {
	certFile, keyFile, client := serving(t)
	addr, _ := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples, "--tls-cert", certFile, "--tls-key", keyFile}, nil)
	defer client.CloseIdleConnections()

	places := 16 * runtime.GOMAXPROCS(0)
	type result struct {
		code  int
		body  string
		proto string
		err   error
	}
	stalled := make(chan result, places+1)
	var writers []*io.PipeWriter
	for range places + 1 {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		req, _ := http.NewRequest("POST", "https://"+addr+"/validate?timeout=30s", pr)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = 1000
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				stalled <- result{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			stalled <- result{code: resp.StatusCode, body: string(b), proto: resp.Proto}
		}()
		go pw.Write([]byte(`{"apiVersion":`)) // then nothing more
	}
	defer func() {
		for _, pw := range writers {
			pw.Close()
		}
	}()
	// A complete review beside them, on the same client.
	resp, err := client.Post("https://"+addr+"/validate?timeout=10s", "application/json", strings.NewReader(review(t)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || !strings.Contains(string(got), `"allowed":false`) {
		t.Fatalf("a complete review beside %d stalled streams: %s %d %s", places+1, resp.Proto, resp.StatusCode, got)
	}
	const idle = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"request body stopped arriving: no byte for 5s","reason":"Timeout","code":408}`
	for range places + 1 {
		r := <-stalled
		if r.err != nil || r.code != http.StatusRequestTimeout || r.body != idle || r.proto != "HTTP/2.0" {
			t.Fatalf("a stalled stream: %s %d %s %v", r.proto, r.code, r.body, r.err)
		}
	}
}
