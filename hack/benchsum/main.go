// Command benchsum reads `go test -bench` output and prints one line per
// performance measure of docs/performance.md:
//
//	P<n> <ratio> target <op><value> PASS|FAIL
//
// Ratios divide two benchmarks of the same run (a subject and its
// baseline), or are reported by one benchmark that ran both alternately;
// with -count above 1 the median of each figure is used. It exits 1 when a
// measure's benchmarks are missing from the output, 0 otherwise: a FAIL is
// a reading, not a broken build.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// measure is one line of the summary.
type measure struct {
	id string
	// Either a ratio of ns/op of two benchmarks…
	subject, baseline string
	// …or a metric one benchmark reports.
	bench, unit string
	atMost      bool // target is ≤ value, else ≥ value
	target      float64
}

var measures = []measure{
	{id: "P1", subject: "BenchmarkP1Review/admitfn", baseline: "BenchmarkP1Review/floor", atMost: true, target: 2.0},
	{id: "P2", subject: "BenchmarkP2Evaluate/admitfn", baseline: "BenchmarkP2Evaluate/upstream", atMost: true, target: 0.25},
	{id: "P3", subject: "BenchmarkP3Index/1000-policies", baseline: "BenchmarkP3Index/10-policies", atMost: true, target: 1.2},
	{id: "P4", bench: "BenchmarkP4ColdStart", unit: "x-minimal", atMost: true, target: 3},
	{id: "P5", bench: "BenchmarkP5Throughput", unit: "x-minimal", atMost: false, target: 0.5},
	{id: "P6", bench: "BenchmarkP6Memory", unit: "rss-MiB", atMost: true, target: 64},
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchsum:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	results, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsum:", err)
		os.Exit(2)
	}
	lines, complete := summarize(results)
	for _, l := range lines {
		fmt.Println(l)
	}
	if !complete {
		os.Exit(1)
	}
}

// results maps a benchmark name (without the -GOMAXPROCS suffix) to its
// figures by unit, one per run.
type results map[string]map[string][]float64

var procsSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) (results, error) {
	out := results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a benchmark's own log line
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		if out[name] == nil {
			out[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: figure %q: %w", name, f[i], err)
			}
			out[name][f[i+1]] = append(out[name][f[i+1]], v)
		}
	}
	return out, sc.Err()
}

func (r results) median(name, unit string) (float64, bool) {
	vs := slices.Clone(r[name][unit])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

func summarize(r results) (lines []string, complete bool) {
	complete = true
	for _, m := range measures {
		op := ">="
		if m.atMost {
			op = "<="
		}
		target := fmt.Sprintf("target %s%s", op, strconv.FormatFloat(m.target, 'f', -1, 64))
		var value float64
		var ok bool
		if m.bench != "" {
			value, ok = r.median(m.bench, m.unit)
		} else {
			s, okS := r.median(m.subject, "ns/op")
			b, okB := r.median(m.baseline, "ns/op")
			ok = okS && okB && b > 0
			if ok {
				value = s / b
			}
		}
		if !ok {
			complete = false
			lines = append(lines, fmt.Sprintf("%s n/a %s FAIL", m.id, target))
			continue
		}
		pass := value <= m.target
		if !m.atMost {
			pass = value >= m.target
		}
		verdict := "FAIL"
		if pass {
			verdict = "PASS"
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s", m.id, format(value), target, verdict))
	}
	return lines, complete
}

// format keeps three significant digits.
func format(v float64) string {
	return strconv.FormatFloat(v, 'g', 3, 64)
}
