// Package soak drives the server binary with concurrent keep-alive clients
// on loopback for a fixed time: every answer must be the exact bytes of the
// first answer to the same review, latencies are reported as percentiles,
// and the server's resident memory is sampled to show it stays flat.
package soak

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

// Case is one review the clients send, on its route.
type Case struct {
	Name  string
	Route string // "/validate/<group>", without the path token
	Body  []byte
}

// ServeIn sends the case to h in-process, as a client would send it to a
// server, and returns the answer's status and body; benchmarks of the
// handlers use it.
func (c Case) ServeIn(h http.Handler) (status int, body []byte) {
	r := httptest.NewRequest(http.MethodPost, c.Route, bytes.NewReader(c.Body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// Config is a soak run.
type Config struct {
	Server   string // the server binary
	Policies string // the bundle it serves
	Cases    []Case
	Clients  int
	Duration time.Duration
	// Requests, if set, ends the run once that many reviews have been
	// answered, if the duration has not ended it first.
	Requests int
	// Window is the span at the start and at the end of the run whose
	// resident memory is compared.
	Window time.Duration
	// Sample is how often resident memory is read.
	Sample time.Duration
}

// Report is what a run measured.
type Report struct {
	Requests int
	Errors   int
	// FirstErrors are the first few errors, verbatim.
	FirstErrors []string
	Elapsed     time.Duration
	P50, P90    time.Duration
	P99, Max    time.Duration
	// RSS samples of the server, bytes, one per Config.Sample.
	RSS []int64
	// Resident memory at its highest in the first and the last Window.
	FirstRSS, LastRSS int64
	// EndRSS is the server's resident memory when the load ended.
	EndRSS int64
	// CPU is the user and system time the server spent during the load.
	CPU time.Duration
}

// Flat reports whether the server's resident memory in the last window
// stayed within 10% (and 4 MiB of slack for allocator granularity) of its
// highest in the first window. Memory that was not measured is not flat.
func (r *Report) Flat() bool {
	return r.measured() && r.LastRSS <= r.FirstRSS+r.FirstRSS/10+4<<20
}

// measured: both windows had memory samples.
func (r *Report) measured() bool { return r.FirstRSS > 0 && r.LastRSS > 0 }

// OK is a run without errors and with flat memory.
func (r *Report) OK() bool { return r.Requests > 0 && r.Errors == 0 && r.Flat() }

// Title is the line `make soak` prints before it starts.
func (c Config) Title() string {
	return fmt.Sprintf("soak: %d clients for %v against the server with %s (%d reviews), %s, %d CPUs\n",
		c.Clients, c.Duration, c.Policies, len(c.Cases), runtime.Version(), runtime.NumCPU())
}

// String is the report for people, one measure per line.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests   %d in %v (%.0f/s)\n", r.Requests, r.Elapsed.Round(time.Millisecond), float64(r.Requests)/r.Elapsed.Seconds())
	fmt.Fprintf(&b, "errors     %d\n", r.Errors)
	for _, e := range r.FirstErrors {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprintf(&b, "latency    p50 %v  p90 %v  p99 %v  max %v\n", r.P50, r.P90, r.P99, r.Max)
	verdict := "flat"
	switch {
	case !r.measured():
		verdict = "NOT MEASURED"
	case !r.Flat():
		verdict = "GROWING"
	}
	fmt.Fprintf(&b, "server RSS first window max %.1f MiB, last window max %.1f MiB: %s\n", mib(r.FirstRSS), mib(r.LastRSS), verdict)
	return b.String()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// ExampleCases are the golden reviews of the HTTP adapter's tests
// (adapters/httpadapter/testdata/reviews.json), on the routes of the bundle in
// policies, which must be policies/examples.
func ExampleCases(testdata, policies string) ([]Case, error) {
	raw, err := os.ReadFile(filepath.Join(testdata, "reviews.json"))
	if err != nil {
		return nil, err
	}
	var list []struct{ Name, Binding string }
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s/reviews.json: %w", testdata, err)
	}
	eng, _, err := engine.Load(os.DirFS(policies), ".", celeval.NewCompiler())
	if err != nil {
		return nil, err
	}
	routes := map[string]string{}
	for _, g := range eng.Groups() {
		for _, b := range g.Bindings {
			routes[b.Name] = g.Path()
		}
		for _, b := range g.MutatingBindings {
			routes[b.Name] = g.Path()
		}
	}
	var cases []Case
	for _, c := range list {
		route, ok := routes[c.Binding]
		if !ok {
			return nil, fmt.Errorf("review %s: no binding %s in %s", c.Name, c.Binding, policies)
		}
		body, err := os.ReadFile(filepath.Join(testdata, c.Name+".request.json"))
		if err != nil {
			return nil, err
		}
		cases = append(cases, Case{Name: c.Name, Route: route, Body: body})
	}
	return cases, nil
}

// Run starts the server, warms every case up, drives the load and stops the
// server. An error is a run that could not happen; a failed run is a report
// that is not OK.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Clients <= 0 || cfg.Duration <= 0 || len(cfg.Cases) == 0 {
		return nil, errors.New("soak: want clients, a duration and cases")
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 250 * time.Millisecond
	}
	if cfg.Window <= 0 || 2*cfg.Window > cfg.Duration {
		return nil, fmt.Errorf("soak: window %v must fit twice in the duration %v", cfg.Window, cfg.Duration)
	}
	srv, err := start(ctx, cfg.Server, cfg.Policies)
	if err != nil {
		return nil, err
	}
	defer srv.stop()

	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients, MaxConnsPerHost: cfg.Clients, DisableCompression: true},
		Timeout:   15 * time.Second,
	}
	defer client.CloseIdleConnections()

	// The first answer to each case is what every later one must be.
	want := make([][]byte, len(cfg.Cases))
	for i, c := range cfg.Cases {
		body, err := post(ctx, client, srv.base+c.Route, c.Body)
		if err != nil {
			return nil, fmt.Errorf("soak: warm-up %s: %w", c.Name, err)
		}
		want[i] = body
	}

	rep := &Report{}
	var (
		mu        sync.Mutex
		latencies []time.Duration
	)
	fail := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		rep.Errors++
		if len(rep.FirstErrors) < 5 {
			rep.FirstErrors = append(rep.FirstErrors, msg)
		}
	}

	loadCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	samplerDone := make(chan []int64)
	go func() { samplerDone <- sampleRSS(loadCtx, srv.cmd.Process.Pid, cfg.Sample) }()

	cpu0, _ := CPUTime(srv.cmd.Process.Pid)
	start := time.Now()
	var (
		wg   sync.WaitGroup
		sent atomic.Int64
	)
	for w := range cfg.Clients {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1<<14)
			for n := w; loadCtx.Err() == nil; n++ {
				if cfg.Requests > 0 && sent.Add(1) > int64(cfg.Requests) {
					break
				}
				i := n % len(cfg.Cases)
				t0 := time.Now()
				body, err := post(loadCtx, client, srv.base+cfg.Cases[i].Route, cfg.Cases[i].Body)
				if loadCtx.Err() != nil {
					break // the run ended during this request: not counted
				}
				mine = append(mine, time.Since(t0))
				switch {
				case err != nil:
					fail(cfg.Cases[i].Name + ": " + err.Error())
				case !bytes.Equal(body, want[i]):
					fail(fmt.Sprintf("%s: answer differs from the first one: %.200s", cfg.Cases[i].Name, body))
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.EndRSS, _ = RSS(srv.cmd.Process.Pid)
	if cpu1, err := CPUTime(srv.cmd.Process.Pid); err == nil {
		rep.CPU = cpu1 - cpu0
	}
	cancel()
	rep.RSS = <-samplerDone
	if err := srv.alive(); err != nil {
		fail(err.Error())
	}

	rep.Requests = len(latencies)
	if len(latencies) > 0 {
		slices.Sort(latencies)
		q := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
		rep.P50, rep.P90, rep.P99, rep.Max = q(0.50), q(0.90), q(0.99), latencies[len(latencies)-1]
	}
	rep.FirstRSS, rep.LastRSS = windowMax(rep.RSS, int(cfg.Window/cfg.Sample))
	return rep, nil
}

// windowMax is the highest sample of the first and of the last perWindow
// samples. A ticker can fall a sample short of filling both windows (a 20s
// run sampled every 250ms gives 79 samples, not 80), so the windows shrink
// to half the samples each rather than go unmeasured; with fewer than two
// samples both are 0, which Flat does not pass.
func windowMax(samples []int64, perWindow int) (first, last int64) {
	n := min(perWindow, len(samples)/2)
	if n <= 0 {
		return 0, 0
	}
	return slices.Max(samples[:n]), slices.Max(samples[len(samples)-n:])
}

func post(ctx context.Context, c *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, out)
	}
	return out, nil
}

// sampleRSS reads the process's resident memory every interval until ctx
// ends.
func sampleRSS(ctx context.Context, pid int, interval time.Duration) []int64 {
	var samples []int64
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return samples
		case <-t.C:
			if n, err := RSS(pid); err == nil {
				samples = append(samples, n)
			}
		}
	}
}

// RSS is a process's resident set size in bytes, from /proc.
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// CPUTime is the user and system time a process has spent, all its threads
// together (/proc/<pid>/stat, in clock ticks of 10 ms).
func CPUTime(pid int) (time.Duration, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return time.Duration(st.UTime+st.STime) * 10 * time.Millisecond, nil
}

type server struct {
	cmd    *exec.Cmd
	base   string // http://addr/<token>
	exited chan error
}

// start runs the server on a loopback port with a fresh path token, so the
// token check is part of every request, and waits until it serves.
func start(ctx context.Context, bin, policies string) (*server, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	cmd := exec.CommandContext(ctx, bin, "--addr", "127.0.0.1:0", "--policies", policies, "--refresh-interval", "0")
	cmd.Env = append(os.Environ(), "ADMITFN_TOKENS="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct{ Message, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "serving" {
				addr <- line.Addr
				break
			}
		}
		io.Copy(io.Discard, stderr) // one log line per review: read and dropped
	}()
	go func() { s.exited <- cmd.Wait() }()
	select {
	case a := <-addr:
		s.base = "http://" + a + "/" + token
		return s, nil
	case err := <-s.exited:
		return nil, fmt.Errorf("soak: server exited before serving: %v", err)
	case <-time.After(2 * time.Minute): // a safety net for a loaded machine
		cmd.Process.Kill()
		return nil, errors.New("soak: server not serving after two minutes")
	}
}

// alive is an error if the server exited during the run.
func (s *server) alive() error {
	select {
	case err := <-s.exited:
		s.exited <- err
		return fmt.Errorf("server exited during the run: %v", err)
	default:
		return nil
	}
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}
