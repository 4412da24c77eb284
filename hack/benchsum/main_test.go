package main

import (
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/doccheck"
)

const output = `goos: linux
goarch: amd64
pkg: github.com/admitfn/admitfn/core/engine
cpu: AMD EPYC
BenchmarkP1Review-2         	    1909	    600000 ns/op	       300.0 admitfn-µs	       150.0 floor-µs	       171.0 evaluation-floor-µs	         3.000 x-floor	         1.140 evaluation-x-floor	  315031 B/op	    4967 allocs/op
BenchmarkP1Review-2         	    1909	    400000 ns/op	       200.0 admitfn-µs	       100.0 floor-µs	       114.0 evaluation-floor-µs	         2.000 x-floor	         1.140 evaluation-x-floor	  315031 B/op	    4967 allocs/op
BenchmarkP1Review-2         	    1909	    500000 ns/op	       280.0 admitfn-µs	       140.0 floor-µs	       900.0 evaluation-floor-µs	         2.000 x-floor	         6.400 evaluation-x-floor	  315031 B/op	    4967 allocs/op
BenchmarkP2Evaluate/admitfn-2       	    2440	    100000 ns/op	  248558 B/op	    3798 allocs/op
BenchmarkFloors-2   	      10	 100396092 ns/op	       830.5 admitfn-µs	       701.8 floor-µs	           0.6141 p2-admitfn	         0.18 p2-floor	         0.62 p8	      1352 upstream-µs	29839876 B/op	  566761 allocs/op
BenchmarkP2Evaluate/upstream-2      	    1190	    500000 ns/op	  560170 B/op	    7972 allocs/op
BenchmarkP3Index-2    	    1929	    210000 ns/op	       110.0 1000-policies-µs	       100.0 10-policies-µs	         1.100 x-10-policies	  394004 B/op	    7227 allocs/op
BenchmarkP4ColdStart-2    	       2	 594302079 ns/op	       565.2 admitfn-ms	         5.469 minimal-ms	        20.1 upstream-ms	       103.3 x-minimal	         3.675 upstream-x-minimal	         4.100 handler-x-minimal	 2536964 B/op	   28227 allocs/op
BenchmarkP5Throughput-2   	       1	6213647819 ns/op	      5735 admitfn-req/s	     29934 minimal-req/s	         0.5 x-minimal	         0.4 handler-x-minimal	583241024 B/op	 6433460 allocs/op
BenchmarkP7ColdStart-2    	      20	  60000000 ns/op	        50.1 admitfn-ms	         14.3 hello-ms	        74.4 upstream-ms	         3.5 x-hello	         5.2 upstream-x-hello
BenchmarkL1Linear-2         	       1	6800000000 ns/op	       400.0 10k-ms	      6400 40k-ms	        16.00 x-10k
BenchmarkL2PodSecurity-2    	       1	2000000000 ns/op	       500.0 10k-ms	      1500 40k-ms	         3.000 x-10k
BenchmarkA1Apply/apply-2         	       1	15000000000 ns/op	    300000 ns/resource
BenchmarkP9ClusterReview/without-cluster-2         	   50540	     20000 ns/op	   13140 B/op	     171 allocs/op
BenchmarkP9ClusterReview/with-cluster-2            	   57369	     18000 ns/op	   14234 B/op	     139 allocs/op
BenchmarkA1Apply/engine-2        	       1	21000000000 ns/op	    420000 ns/resource
BenchmarkD1PushDownCalls-2  	       4	 250000000 ns/op	        51.00 calls-after	        63.00 calls-before	         0.8100 calls-floor	         0.8100 calls-ratio	         0 wasted-after	         0.1900 wasted-before
    process_test.go:80: a log line mentioning BenchmarkP6Memory 1 2 3
PASS
`

func TestSummary(t *testing.T) {
	r, err := parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	lines, complete := summarize(r)
	want := []string{
		"floor P1 1.14 target <=1.25 reachable", // P1's and P2's targets: 1.1 × their floors; medians
		"floor P2 0.18 target <=0.198 reachable",
		"floor P4 4.1 target <=8 reachable",
		"floor P5 0.4 target >=0.5 unreachable", // at least the target, for a throughput
		"floor P6 n/a target <=64 unmeasured",
		"floor P7 5.2 target <=4 unreachable",
		"floor D1 0.81 target <=0.3 unreachable",
		"P1 2 target <=1.25 FAIL",
		"P2 0.2 target <=0.198 FAIL",
		"P3 1.1 target <=1.2 PASS",
		"P4 103 target <=8 FAIL",
		"P5 0.5 target >=0.5 PASS",
		"P6 n/a target <=64 FAIL",
		"P7 3.5 target <=4 PASS",
		"P8 0.62 target <=0.8 PASS",
		"P9 0.9 target <=1.1 PASS",
		"L1 16 target <=5 FAIL",
		"L2 3 target <=5 PASS",
		"A1 1.4 target >=1 PASS",
		"D1 0.81 target <=0.3 FAIL",
		"D2 0 target <=0.1 PASS",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("summary\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if complete {
		t.Error("complete with P6 missing")
	}
}

// A target relative to a floor the run did not measure cannot be met.
func TestTargetOfAMissingFloor(t *testing.T) {
	r, err := parse(strings.NewReader("BenchmarkP1Review-2 10 300 ns/op 3 x-floor\n"))
	if err != nil {
		t.Fatal(err)
	}
	lines, complete := summarize(r)
	if complete || !slices.Contains(lines, "floor P1 n/a target <=n/a unmeasured") || !slices.Contains(lines, "P1 3 target <=n/a FAIL") {
		t.Errorf("complete %v:\n%s", complete, strings.Join(lines, "\n"))
	}
}

func TestBadFigure(t *testing.T) {
	if _, err := parse(strings.NewReader("BenchmarkX-2 10 abc ns/op\n")); err == nil || !strings.Contains(err.Error(), `BenchmarkX: figure "abc"`) {
		t.Errorf("error %v", err)
	}
}

// -results rewrites only the section between the markers, with the run's
// date, summary and benchmark lines, and refuses a file without them.
func TestWriteResults(t *testing.T) {
	at := time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC)
	section := resultsSection(at, "linux/amd64, 2 CPUs", []string{"P1 2 target <=2 PASS"}, []byte(output))
	want := "`make bench` on 2026-11-25 (" + runtime.Version() + ", linux/amd64, 2 CPUs):\n\n" + checked + "```text\nP1 2 target <=2 PASS\n```\n\n"
	if !strings.HasPrefix(section, want) {
		t.Errorf("section starts\n%s\nwant\n%s", section, want)
	}
	if !strings.Contains(section, "\nBenchmarkL1Linear-2 1 6800000000 ns/op 400.0 10k-ms 6400 40k-ms 16.00 x-10k\n") || strings.Contains(section, "process_test.go") || strings.Contains(section, "goos:") {
		t.Errorf("raw output keeps the benchmark lines only, one space apart:\n%s", section)
	}
	doc := []byte("# Perf\n\nnarrative\n\n## Results\n\n" + resultsStart + "\nold figures\n" + resultsEnd + "\n\nafter\n")
	got, err := writeResults(doc, section)
	if err != nil {
		t.Fatal(err)
	}
	if w := "# Perf\n\nnarrative\n\n## Results\n\n" + resultsStart + "\n" + section + resultsEnd + "\n\nafter\n"; string(got) != w {
		t.Errorf("rewritten:\n%s\nwant:\n%s", got, w)
	}
	if again, err := writeResults(got, section); err != nil || string(again) != string(got) {
		t.Errorf("rewriting the same run changed the document (%v):\n%s", err, again)
	}
	if _, err := writeResults([]byte("# Perf\n"), section); err == nil || !strings.Contains(err.Error(), "no results section") {
		t.Errorf("a document without markers: %v", err)
	}
}

// docs/performance.md's results are what benchsum makes of the benchmark
// lines they keep, and the page's two formats describe every line benchsum
// prints.
func TestPerformanceResults(t *testing.T) {
	blocks := doccheck.Find(t, "docs/performance.md", 4) // two formats, the summary, the raw lines
	summary, raw := blocks[2], blocks[3]
	r, err := parse(strings.NewReader(raw.Text))
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := summarize(r)
	if got := strings.Join(lines, "\n") + "\n"; got != summary.Text {
		t.Errorf("%s: benchsum makes of the run's lines\n%s\nwhere the page shows\n%s(make bench rewrites the results)", summary, got, summary.Text)
	}
	var formats []*regexp.Regexp
	for _, b := range blocks[:2] {
		formats = append(formats, formatRegexp(t, strings.TrimSpace(b.Text)))
	}
	test, _ := parse(strings.NewReader(output))
	testLines, _ := summarize(test)
	for _, l := range append(lines, testLines...) {
		if !formats[0].MatchString(l) && !formats[1].MatchString(l) {
			t.Errorf("%q fits neither format of docs/performance.md (%s, %s)", l, blocks[0], blocks[1])
		}
	}
}

// formatRegexp reads a format line: <placeholders>, a|b alternatives, and
// literal words.
func formatRegexp(t *testing.T, format string) *regexp.Regexp {
	placeholders := strings.NewReplacer("<id>", `[A-Z]\d+`, "<ratio>", `(?:\d[\d.e+]*|n/a)`, "<op>", `(?:<=|>=)`, "<value>", `(?:\d[\d.e+]*|n/a)`)
	var words []string
	for _, w := range strings.Fields(format) {
		switch {
		case strings.Contains(w, "<"):
			if regexp.MustCompile(`<[a-z]+>`).MatchString(placeholders.Replace(w)) {
				t.Fatalf("format %q: unknown placeholder in %q", format, w)
			}
			words = append(words, placeholders.Replace(w))
		case strings.Contains(w, "|"):
			words = append(words, "(?:"+w+")")
		default:
			words = append(words, regexp.QuoteMeta(w))
		}
	}
	return regexp.MustCompile("^" + strings.Join(words, " ") + "$")
}
