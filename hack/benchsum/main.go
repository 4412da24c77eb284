// Command benchsum reads `go test -bench` output and prints one line per
// performance measure of docs/performance.md:
//
//	P<n> <ratio> target <op><value> PASS|FAIL
//
// Before them come the floors measured in the same run, the least a measure
// can read for a function built on kube-apiserver's own packages, programs
// and cost budgets, as admitfn is:
//
//	floor P<n> <ratio> target <op><value> reachable|unreachable
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

// measure is one line of the summary, and of the floors where it has one.
type measure struct {
	id     string
	value  figure
	floor  figure // none when zero
	atMost bool   // target is ≤ value, else ≥ value
	target float64
}

// figure is either a ratio of the ns/op of two benchmarks or a metric one
// benchmark reports.
type figure struct {
	subject, baseline string
	bench, unit       string
}

func ratio(subject, baseline string) figure { return figure{subject: subject, baseline: baseline} }

func metric(bench, unit string) figure { return figure{bench: bench, unit: unit} }

var measures = []measure{
	{
		id: "P1", value: ratio("BenchmarkP1Review/admitfn", "BenchmarkP1Review/floor"),
		// Decoding the Pod and evaluating what its answer needs, encoding
		// the answer left out.
		floor:  metric("BenchmarkFloors", "p1-floor"),
		atMost: true, target: 2.0,
	},
	{
		id: "P2", value: ratio("BenchmarkP2Evaluate/admitfn", "BenchmarkP2Evaluate/upstream"),
		floor:  metric("BenchmarkFloors", "p2-floor"),
		atMost: true, target: 0.25,
	},
	{id: "P3", value: ratio("BenchmarkP3Index/1000-policies", "BenchmarkP3Index/10-policies"), atMost: true, target: 1.2},
	{
		id: "P4", value: metric("BenchmarkP4ColdStart", "x-minimal"),
		floor:  metric("BenchmarkP4ColdStart", "upstream-x-minimal"),
		atMost: true, target: 3,
	},
	{id: "P5", value: metric("BenchmarkP5Throughput", "x-minimal"), atMost: false, target: 0.5},
	{
		id: "P6", value: metric("BenchmarkP6Memory", "rss-MiB"),
		floor:  metric("BenchmarkP6Memory", "upstream-rss-MiB"),
		atMost: true, target: 64,
	},
	// Evaluation time grows linearly with the object: 4x the containers,
	// at most 5x the time.
	{id: "L1", value: ratio("BenchmarkL1Linear/40k-containers", "BenchmarkL1Linear/10k-containers"), atMost: true, target: 5},
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

// of is the figure's value in r, if r has the benchmarks it needs.
func (r results) of(f figure) (float64, bool) {
	if f.bench != "" {
		return r.median(f.bench, f.unit)
	}
	s, okS := r.median(f.subject, "ns/op")
	b, okB := r.median(f.baseline, "ns/op")
	if !okS || !okB || b <= 0 {
		return 0, false
	}
	return s / b, true
}

// meets reports whether v is on the right side of m's target.
func (m measure) meets(v float64) bool {
	if m.atMost {
		return v <= m.target
	}
	return v >= m.target
}

func summarize(r results) (lines []string, complete bool) {
	complete = true
	line := func(prefix string, m measure, f figure, yes, no, missing string) string {
		op := ">="
		if m.atMost {
			op = "<="
		}
		target := fmt.Sprintf("target %s%s", op, strconv.FormatFloat(m.target, 'f', -1, 64))
		v, ok := r.of(f)
		if !ok {
			complete = false
			return fmt.Sprintf("%s%s n/a %s %s", prefix, m.id, target, missing)
		}
		verdict := no
		if m.meets(v) {
			verdict = yes
		}
		return fmt.Sprintf("%s%s %s %s %s", prefix, m.id, format(v), target, verdict)
	}
	for _, m := range measures {
		if m.floor != (figure{}) {
			lines = append(lines, line("floor ", m, m.floor, "reachable", "unreachable", "unmeasured"))
		}
	}
	for _, m := range measures {
		lines = append(lines, line("", m, m.value, "PASS", "FAIL", "FAIL"))
	}
	return lines, complete
}

// format keeps three significant digits.
func format(v float64) string {
	return strconv.FormatFloat(v, 'g', 3, 64)
}
