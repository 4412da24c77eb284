package soak

import (
	"context"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/doccheck"
	"github.com/admitfn/admitfn/test/testbin"
)

// buildServer is the server as make builds it for the tests.
func buildServer(t *testing.T) string {
	t.Helper()
	return testbin.Path(t, "server")
}

func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }

// A short run of what `make soak` runs for a minute.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads the server")
	}
	cases, err := ExampleCases("../../adapters/httpadapter/testdata", "../../policies/examples")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 10 {
		t.Fatalf("%d cases, want the 10 golden reviews", len(cases))
	}
	cfg := Config{Server: buildServer(t), Policies: "../../policies/examples", Cases: cases, Clients: 4, Duration: 3 * time.Second, Window: time.Second, Sample: 100 * time.Millisecond}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	// docs/performance.md's run has the lines this one has.
	verdict := regexp.MustCompile(`: (flat|GROWING|NOT MEASURED)\n`)
	got := verdict.ReplaceAllString(doccheck.Shape(strings.Replace(cfg.Title()+rep.String(), "../../", "", 1)), ": VERDICT\n")
	if want := verdict.ReplaceAllString(doccheck.Shape(doccheck.Find(t, "docs/performance.md", 1)[0].Text), ": VERDICT\n"); got != want {
		t.Errorf("the soak prints\n%s\ndocs/performance.md shows\n%s", got, want)
	}
	if rep.Errors != 0 || rep.Requests < len(cases) {
		t.Errorf("%d errors in %d requests: %v", rep.Errors, rep.Requests, rep.FirstErrors)
	}
	if rep.P50 <= 0 || rep.P50 > rep.P99 || rep.P99 > rep.Max || len(rep.RSS) < 20 || rep.FirstRSS <= 0 || rep.LastRSS <= 0 {
		t.Errorf("incomplete report: %+v", rep)
	}
}

func TestWarmUpFailureStopsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	cases, err := ExampleCases("../../adapters/httpadapter/testdata", "../../policies/examples")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Config{Server: buildServer(t), Policies: "../../policies/examples",
		Cases: []Case{{Name: "drifted", Route: "/validate/nosuchgroup", Body: cases[0].Body}}, Clients: 1, Duration: 2 * time.Second, Window: time.Second})
	if err == nil || !strings.HasPrefix(err.Error(), `soak: warm-up drifted: HTTP 404: {"kind":"Status"`) {
		t.Errorf("error %v", err)
	}
}

func TestFlat(t *testing.T) {
	for _, tc := range []struct {
		first, last int64
		flat        bool
	}{
		{40 << 20, 40 << 20, true},
		{40 << 20, 30 << 20, true},
		{40 << 20, 48 << 20, true},  // 10% + 4 MiB
		{40 << 20, 49 << 20, false}, // beyond
		{100 << 20, 200 << 20, false},
	} {
		r := Report{Requests: 1, FirstRSS: tc.first, LastRSS: tc.last}
		if r.Flat() != tc.flat || r.OK() != tc.flat {
			t.Errorf("first %d MiB, last %d MiB: flat %v, want %v", tc.first>>20, tc.last>>20, r.Flat(), tc.flat)
		}
	}
	if (&Report{Requests: 1, Errors: 1, FirstRSS: 1, LastRSS: 1}).OK() {
		t.Error("a run with an error is OK")
	}
	if r := (&Report{Requests: 1}); r.Flat() || r.OK() || !strings.Contains(r.String(), "last window max 0.0 MiB: NOT MEASURED") {
		t.Errorf("a run without memory samples: flat %v, OK %v, report %s", r.Flat(), r.OK(), r)
	}
}

func TestWindowMax(t *testing.T) {
	for _, tc := range []struct {
		samples     []int64
		perWindow   int
		first, last int64
	}{
		{[]int64{5, 1, 2, 3, 9, 4}, 2, 5, 9},
		{[]int64{5, 1, 2, 3, 9, 4}, 3, 5, 9},
		// A sample short of two full windows: each shrinks to half.
		{[]int64{1, 7, 2, 8, 3}, 3, 7, 8},
		{[]int64{6, 2}, 40, 6, 2},
		{[]int64{6}, 40, 0, 0},
		{nil, 40, 0, 0},
		{[]int64{1, 2, 3}, 0, 0, 0},
	} {
		if first, last := windowMax(tc.samples, tc.perWindow); first != tc.first || last != tc.last {
			t.Errorf("windowMax(%v, %d) = %d, %d; want %d, %d", tc.samples, tc.perWindow, first, last, tc.first, tc.last)
		}
	}
}

// A run with a request count stops at exactly that count, well before its
// duration, and reports the server's memory at the end.
func TestRequestsEndTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads the server")
	}
	cases, err := ExampleCases("../../adapters/httpadapter/testdata", "../../policies/examples")
	if err != nil {
		t.Fatal(err)
	}
	// The duration is a safety net: the count is what ends the run.
	const duration = 5 * time.Minute
	rep, err := Run(context.Background(), Config{Server: buildServer(t), Policies: "../../policies/examples", Cases: cases, Clients: 3, Duration: duration, Requests: 250, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 250 || rep.Errors != 0 || rep.Elapsed >= duration || rep.EndRSS <= 0 {
		t.Errorf("report %+v, want 250 requests without errors, before the duration ran out, with the server's memory", rep)
	}
}

// CPUTime sees this process spend CPU, no more than its threads could in
// the time it took, and names a process that is not there.
func TestCPUTime(t *testing.T) {
	pid := os.Getpid()
	began := time.Now()
	before, err := CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	spent, x := time.Duration(0), 0
	for spent < 100*time.Millisecond {
		for i := range 1_000_000 {
			x += i
		}
		now, err := CPUTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		spent = now - before
		if time.Since(began) > 2*time.Minute { // a safety net for a loaded machine
			t.Fatalf("%v of CPU after two minutes of spinning (%d)", spent, x)
		}
	}
	if limit := time.Since(began)*time.Duration(runtime.NumCPU()) + 20*time.Millisecond; spent > limit {
		t.Errorf("%v of CPU in %v on %d CPUs", spent, time.Since(began), runtime.NumCPU())
	}
	if _, err := CPUTime(1 << 30); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("CPUTime of no process: %v", err)
	}
}
