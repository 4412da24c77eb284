// Command benchsum reads `go test -bench` output and prints one line per
// performance measure of docs/performance.md:
//
//	P<n> <ratio> target <op><value> PASS|FAIL
//
// Before them come the floors measured in the same run, the least a measure
// can read for a function built on kube-apiserver's own packages, programs
// and cost budgets, as admitfn is (P5's: for a server answering with
// admitfn's review handler):
//
//	floor P<n> <ratio> target <op><value> reachable|unreachable
//
// Ratios divide two benchmarks of the same run (a subject and its
// baseline), or are reported by one benchmark that ran both alternately;
// with -count above 1 the median of each figure is used. It exits 1 when a
// measure's benchmarks are missing from the output, 0 otherwise: a FAIL is
// a reading, not a broken build.
//
// With -results FILE it also rewrites FILE's results section (between
// resultsStart and resultsEnd): the date, the machine, the summary and the
// raw output, so docs/performance.md's figures are the last run's.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// measure is one line of the summary, and of the floors where it has one.
type measure struct {
	id     string
	value  figure
	floor  figure // none when zero
	atMost bool   // target is ≤ value, else ≥ value
	target float64
	// ofFloor, when set, makes the target this multiple of the floor
	// measured in the same run: how close admitfn comes to what its
	// dependencies allow, whatever the machine.
	ofFloor float64
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
		id: "P1", value: metric("BenchmarkP1Review", "x-floor"),
		// Decoding the Pod and evaluating what its answer needs, encoding
		// the answer left out, measured as P1 is.
		floor:  metric("BenchmarkP1Review", "evaluation-x-floor"),
		atMost: true, ofFloor: 1.1,
	},
	{
		id: "P2", value: ratio("BenchmarkP2Evaluate/admitfn", "BenchmarkP2Evaluate/upstream"),
		floor:  metric("BenchmarkFloors", "p2-floor"),
		atMost: true, ofFloor: 1.1,
	},
	{id: "P3", value: metric("BenchmarkP3Index", "x-10-policies"), atMost: true, target: 1.2},
	{
		id: "P4", value: metric("BenchmarkP4ColdStart", "x-minimal"),
		// The minimal server answering with admitfn's review handler over
		// one policy: the upstream packages' init, and a first review.
		floor:  metric("BenchmarkP4ColdStart", "handler-x-minimal"),
		atMost: true, target: 8,
	},
	{
		id: "P5", value: metric("BenchmarkP5Throughput", "x-minimal"),
		// The minimal server answering with admitfn's review handler.
		floor:  metric("BenchmarkP5Throughput", "handler-x-minimal"),
		atMost: false, target: 0.5,
	},
	{
		id: "P6", value: metric("BenchmarkP6Memory", "rss-MiB"),
		floor:  metric("BenchmarkP6Memory", "upstream-rss-MiB"),
		atMost: true, target: 64,
	},
	// The Lambda bootstrap's cold start in a 128 MB memory cgroup: exec to
	// the first answered Function URL event ÷ the same for a minimal
	// aws-lambda-go handler.
	{
		id: "P7", value: metric("BenchmarkP7ColdStart", "x-hello"),
		floor:  metric("BenchmarkP7ColdStart", "upstream-x-hello"),
		atMost: true, target: 4,
	},
	// A floor pushed down: the evaluation floor ÷ the same floor with
	// every cost tracked, as before P8, in one loop.
	{id: "P8", value: metric("BenchmarkFloors", "p8"), atMost: true, target: 0.8},
	// A review whose policies read namespaceObject and ask the authorizer,
	// answered from warm caches ÷ the same review without cluster access.
	{id: "P9", value: ratio("BenchmarkP9ClusterReview/with-cluster", "BenchmarkP9ClusterReview/without-cluster"), atMost: true, target: 1.1},
	// Evaluation time grows linearly with the object: 4x the containers,
	// at most 5x the time.
	{id: "L1", value: metric("BenchmarkL1Linear", "x-10k"), atMost: true, target: 5},
	// The same for the Pod Security profiles, whose comprehensions are
	// tracked (no bound holds at that size).
	{id: "L2", value: metric("BenchmarkL2PodSecurity", "x-10k"), atMost: true, target: 5},
	// admitfn apply on a 50,000-object dump: its throughput ÷ the same
	// reviews made one after another from decoded objects. Reading,
	// decoding and reporting must cost less than reviewing on every CPU
	// gains.
	{id: "A1", value: ratio("BenchmarkA1Apply/engine", "BenchmarkA1Apply/apply"), atMost: false, target: 1},
	// test/workload played against the example bundle and the policy
	// library: the calls the function receives with push-down ÷ without.
	// Its floor is the share of calls on which a binding acts, which no
	// correct push-down can skip.
	{
		id: "D1", value: metric("BenchmarkD1PushDownCalls", "calls-ratio"),
		floor:  metric("BenchmarkD1PushDownCalls", "calls-floor"),
		atMost: true, target: 0.3,
	},
	// The share of the calls it still receives on which no binding acts.
	{id: "D2", value: metric("BenchmarkD1PushDownCalls", "wasted-after"), atMost: true, target: 0.1},
}

func main() {
	resultsFile := flag.String("results", "", "rewrite this Markdown file's results section with this run")
	flag.Parse()
	var raw []byte
	var err error
	if flag.NArg() > 0 {
		raw, err = os.ReadFile(flag.Arg(0))
	} else {
		raw, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsum:", err)
		os.Exit(2)
	}
	results, err := parse(bytes.NewReader(raw))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsum:", err)
		os.Exit(2)
	}
	lines, complete := summarize(results)
	for _, l := range lines {
		fmt.Println(l)
	}
	if *resultsFile != "" {
		doc, err := os.ReadFile(*resultsFile)
		if err == nil {
			doc, err = writeResults(doc, resultsSection(time.Now(), machine(), lines, raw))
		}
		if err == nil {
			err = os.WriteFile(*resultsFile, doc, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchsum:", err)
			os.Exit(2)
		}
	}
	if !complete {
		os.Exit(1)
	}
}

// The results section of a document lies between these lines.
const (
	resultsStart = "<!-- results: make bench writes from here to the end marker; edits are overwritten -->"
	resultsEnd   = "<!-- end of results -->"
)

// writeResults replaces doc's results section with section.
func writeResults(doc []byte, section string) ([]byte, error) {
	i := bytes.Index(doc, []byte(resultsStart))
	j := bytes.Index(doc, []byte(resultsEnd))
	if i < 0 || j < i {
		return nil, errors.New("no results section: want the lines " + resultsStart + " and " + resultsEnd)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(resultsStart)])
	out.WriteString("\n" + section)
	out.Write(doc[j:])
	return out.Bytes(), nil
}

// checked marks each block of the results for the test that holds the
// summary to being what benchsum makes of the raw output.
const checked = "<!-- checked by TestPerformanceResults -->\n"

// resultsSection is a run's dated summary and raw output, in Markdown.
func resultsSection(at time.Time, machine string, summary []string, raw []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`make bench` on %s (%s, %s):\n\n", at.UTC().Format("2006-01-02"), runtime.Version(), machine)
	b.WriteString(checked + "```text\n" + strings.Join(summary, "\n") + "\n```\n\n")
	b.WriteString("The benchmarks' output (`dist/bench.txt`):\n\n" + checked + "```text\n")
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && strings.HasPrefix(f[0], "Benchmark") {
			b.WriteString(strings.Join(f, " ") + "\n")
		}
	}
	b.WriteString("```\n")
	return b.String()
}

// machine names the CPUs the run had, from /proc/cpuinfo where there is one.
func machine() string {
	name := runtime.GOOS + "/" + runtime.GOARCH
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(info), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				name += ", " + strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs", name, runtime.NumCPU())
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

// targetIn is m's target in this run: fixed, or a multiple of the floor
// the run measured (false when it measured none).
func (m measure) targetIn(r results) (float64, bool) {
	if m.ofFloor == 0 {
		return m.target, true
	}
	floor, ok := r.of(m.floor)
	return m.ofFloor * floor, ok
}

// meets reports whether v is on the right side of target.
func (m measure) meets(v, target float64) bool {
	if m.atMost {
		return v <= target
	}
	return v >= target
}

func summarize(r results) (lines []string, complete bool) {
	complete = true
	line := func(prefix string, m measure, f figure, yes, no, missing string) string {
		op := ">="
		if m.atMost {
			op = "<="
		}
		t, known := m.targetIn(r)
		target := fmt.Sprintf("target %sn/a", op)
		if known {
			target = fmt.Sprintf("target %s%s", op, format(t))
		}
		v, ok := r.of(f)
		if !ok || !known {
			complete = false
			value := "n/a"
			if ok {
				value = format(v)
			}
			return fmt.Sprintf("%s%s %s %s %s", prefix, m.id, value, target, missing)
		}
		verdict := no
		if m.meets(v, t) {
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
