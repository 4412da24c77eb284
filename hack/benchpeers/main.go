// Command benchpeers is make bench-peers: admitfn measured side by side
// with the engines a platform team would run instead, on this machine, on
// the same policies and objects (docs/performance.md, "Against the
// alternatives"). The peers run in test/peers, a module of their own.
//
// W1: the policy library's Pod Security profiles (baseline and restricted,
// both applied everywhere) on the Pods of P1 and of the profiles' test
// file, each sent as kube-apiserver sends an AdmissionReview. Every engine
// first decides each review, and the run stops unless all deny the same
// reviews by the same policies, admitfn's message among each peer's; then
// each reviews the whole set in turn, as a Go benchmark, rounds alternating
// between engines, and the medians are compared.
//
// W2 (w2.go): the same policies through each engine's CLI on A1's dump.
// W3 is test/e2e's TestW3PodCreateLatency, which make bench-peers runs
// after this command.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"sigs.k8s.io/yaml"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/test/perf"
)

// profiles are the policy files of W1, in the policy library.
var profiles = []string{"policy-baseline.yaml", "policy-restricted.yaml"}

// w1Goal: admitfn's time at most half the fastest peer's.
const w1Goal = 0.5

func main() {
	peers := flag.String("peers", "dist/peers", "the test/peers binary")
	rounds := flag.Int("rounds", 5, "W1's timed rounds per engine, alternating")
	keep := flag.Bool("keep", false, "keep the work file, and say where")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of admitfn's timed rounds to this file")
	flag.StringVar(&w2cfg.admitfnBin, "admitfn", "dist/test-bin/admitfn", "the admitfn CLI (W2)")
	flag.StringVar(&w2cfg.kyvernoBin, "kyverno", "bin/kyverno", "the kyverno CLI built from test/peers' pins (W2)")
	flag.StringVar(&w2cfg.gatorBin, "gator", "bin/gator", "the gator CLI built from test/peers' pins (W2)")
	flag.IntVar(&w2cfg.objects, "w2-objects", 50_000, "the objects of W2's dump; 0 skips W2")
	flag.IntVar(&w2cfg.rounds, "w2-rounds", 1, "W2's rounds per CLI, alternating")
	flag.Parse()
	w2cfg.peersBin = *peers
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-peers:", err)
			os.Exit(1)
		}
		profile = f
	}
	if err := run(*peers, *rounds, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench-peers:", err)
		os.Exit(1)
	}
}

func run(peers string, rounds int, keep bool) error {
	root := perf.RepoRoot()
	lib := filepath.Join(root, "policies", "library", "pod-security")
	reviews, err := w1Reviews(filepath.Join(lib, "pod-security_test.yaml"))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-peers")
	if err != nil {
		return err
	}
	workFile := filepath.Join(dir, "w1.json")
	if keep {
		fmt.Println("W1 work:", workFile)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := writeWork(workFile, reviews); err != nil {
		return err
	}
	var files []string
	for _, p := range profiles {
		files = append(files, filepath.Join(lib, p))
	}
	both, err := w1Engine(files...)
	if err != nil {
		return err
	}
	// Decided by each profile alone: an answer names one denying policy.
	ours := map[string]map[string][]string{}
	for _, f := range files {
		alone, err := w1Engine(f)
		if err != nil {
			return err
		}
		for _, r := range reviews {
			d, err := decide(alone, r.body)
			if err != nil {
				return fmt.Errorf("admitfn, %s: %w", r.name, err)
			}
			if ours[r.name] == nil {
				ours[r.name] = map[string][]string{}
			}
			for name, msgs := range d {
				ours[r.name][name] = msgs
			}
		}
	}
	denied := 0
	for _, d := range ours {
		if len(d) > 0 {
			denied++
		}
	}
	fmt.Printf("W1 %d reviews, %d denied by admitfn\n", len(reviews), denied)

	engines := []string{"kyverno", "gatekeeper"}
	peerArgs := func(engineName, mode string) []string {
		return []string{"-engine", engineName, "-policies", strings.Join(files, ","), "-work", workFile, "-mode", mode}
	}
	for _, name := range engines {
		out, err := exec.Command(peers, peerArgs(name, "decisions")...).Output()
		if err != nil {
			return fmt.Errorf("%s decisions: %w%s", name, err, stderrOf(err))
		}
		var theirs map[string]map[string][]string
		if err := json.Unmarshal(out, &theirs); err != nil {
			return fmt.Errorf("%s decisions: %w", name, err)
		}
		if diffs := compare(ours, theirs); len(diffs) > 0 {
			return fmt.Errorf("%s decides differently:\n  %s", name, strings.Join(diffs, "\n  "))
		}
		fmt.Printf("W1 %s reaches admitfn's decisions on all %d reviews\n", name, len(reviews))
	}

	times := map[string][]float64{}
	if profile != nil {
		// The process is idle while a peer runs: its samples are admitfn's.
		if err := pprof.StartCPUProfile(profile); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for range rounds {
		times["admitfn"] = append(times["admitfn"], benchAdmitfn(both, reviews))
		for _, name := range engines {
			out, err := exec.Command(peers, peerArgs(name, "bench")...).Output()
			if err != nil {
				return fmt.Errorf("%s bench: %w%s", name, err, stderrOf(err))
			}
			var ns float64
			if _, err := fmt.Sscanf(field(string(out), "ns/review"), "%g", &ns); err != nil {
				return fmt.Errorf("%s bench: %q: %w", name, out, err)
			}
			times[name] = append(times[name], ns)
		}
	}
	for _, name := range append([]string{"admitfn"}, engines...) {
		fmt.Printf("W1 %s %.0f ns/review (median of %v)\n", name, median(times[name]), rounded(times[name]))
	}
	fastest := ""
	for _, name := range engines {
		if fastest == "" || median(times[name]) < median(times[fastest]) {
			fastest = name
		}
		fmt.Printf("W1 admitfn/%s %.3g\n", name, median(times["admitfn"])/median(times[name]))
	}
	ratio := median(times["admitfn"]) / median(times[fastest])
	verdict := "PASS"
	if ratio > w1Goal {
		verdict = "FAIL"
	}
	fmt.Printf("W1 %.3g target <=%g (fastest peer: %s) %s\n", ratio, w1Goal, fastest, verdict)
	if profile != nil {
		pprof.StopCPUProfile()
		profile = nil
	}
	if w2cfg.objects == 0 {
		return nil
	}
	w2cfg.dir, w2cfg.files = dir, files
	return w2(w2cfg)
}

// w2cfg is W2's configuration, from the flags.
var w2cfg w2Config

type namedReview struct {
	name string
	body []byte
}

// w1Reviews are P1's Pod and every Pod of the profiles' test file, each in
// an AdmissionReview of its CREATE as kube-apiserver sends it.
func w1Reviews(testFile string) ([]namedReview, error) {
	out := []namedReview{{"p1-pod", perf.PodReview()}}
	data, err := os.ReadFile(testFile)
	if err != nil {
		return nil, err
	}
	var tests struct {
		Cases []struct {
			Name   string         `json:"name"`
			Object map[string]any `json:"object"`
		} `json:"cases"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		return nil, fmt.Errorf("%s: %w", testFile, err)
	}
	for i, c := range tests.Cases {
		if c.Object["kind"] != "Pod" {
			continue
		}
		meta, _ := c.Object["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		namespace, _ := meta["namespace"].(string)
		gvk := map[string]any{"group": "", "version": "v1", "kind": "Pod"}
		body, err := json.Marshal(map[string]any{
			"apiVersion": "admission.k8s.io/v1",
			"kind":       "AdmissionReview",
			"request": map[string]any{
				"uid":             fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
				"kind":            gvk,
				"resource":        map[string]any{"group": "", "version": "v1", "resource": "pods"},
				"requestKind":     gvk,
				"requestResource": map[string]any{"group": "", "version": "v1", "resource": "pods"},
				"name":            name,
				"namespace":       namespace,
				"operation":       "CREATE",
				"userInfo":        map[string]any{"username": "kubernetes-admin", "groups": []string{"system:authenticated"}},
				"object":          c.Object,
				"oldObject":       nil,
				"dryRun":          false,
				"options":         map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
			},
		})
		if err != nil {
			return nil, err
		}
		out = append(out, namedReview{c.Name, body})
	}
	return out, nil
}

func writeWork(file string, reviews []namedReview) error {
	type entry struct {
		Name   string          `json:"name"`
		Review json.RawMessage `json:"review"`
	}
	var w struct {
		Reviews []entry `json:"reviews"`
	}
	for _, r := range reviews {
		w.Reviews = append(w.Reviews, entry{r.name, r.body})
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// w1Engine is admitfn's engine of the profiles, each bound to every
// namespace.
func w1Engine(files ...string) (*engine.Engine, error) {
	fsys := fstest.MapFS{}
	for _, f := range files {
		data, err := withEverywhereBinding(f)
		if err != nil {
			return nil, err
		}
		fsys[filepath.Base(f)] = &fstest.MapFile{Data: data}
	}
	e, _, err := engine.Load(fsys, ".", celeval.NewCompiler())
	return e, err
}

// withEverywhereBinding is a policy file with a binding of its policy to
// every namespace.
func withEverywhereBinding(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var vap struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := yaml.Unmarshal(data, &vap); err != nil || vap.Metadata.Name == "" {
		return nil, fmt.Errorf("%s: no policy name (%v)", file, err)
	}
	binding := fmt.Sprintf("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n"+
		"metadata: {name: %s-everywhere}\nspec: {policyName: %s, validationActions: [Deny]}\n", vap.Metadata.Name, vap.Metadata.Name)
	return append(data, "\n---\n"+binding...), nil
}

var validating = policy.Route{Type: policy.Validating}

// decide is admitfn's answer to an AdmissionReview's bytes: the policy that
// denied it, with its message. An answer names one denying policy and its
// first failed validation, as kube-apiserver's does.
func decide(e *engine.Engine, body []byte) (map[string][]string, error) {
	req, err := review.Decode(body)
	if err != nil {
		return nil, err
	}
	res, err := e.Review(context.Background(), validating, req)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	if res.Response.Allowed {
		return out, nil
	}
	msg := res.Response.Result.Message
	// ValidatingAdmissionPolicy 'P' with binding 'B' denied request: M
	rest, ok := strings.CutPrefix(msg, "ValidatingAdmissionPolicy '")
	name, rest, ok2 := strings.Cut(rest, "'")
	_, m, ok3 := strings.Cut(rest, "denied request: ")
	if !ok || !ok2 || !ok3 {
		return nil, fmt.Errorf("a denial admitfn does not word as kube-apiserver: %q", msg)
	}
	out[name] = []string{m}
	return out, nil
}

// compare lists where a peer's decisions differ from admitfn's: a policy
// that denies a review in one and not the other, or admitfn's message (the
// policy's first failed validation) missing from the peer's, which may
// report every failed validation.
func compare(ours, theirs map[string]map[string][]string) []string {
	var diffs []string
	names := make([]string, 0, len(ours))
	for n := range ours {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o, t := ours[n], theirs[n]
		if len(o) == 0 && len(t) == 0 {
			continue
		}
		if !sameKeys(o, t) {
			diffs = append(diffs, fmt.Sprintf("%s: admitfn %v, peer %v", n, o, t))
			continue
		}
		for policyName, msgs := range o {
			if !slices.Contains(t[policyName], msgs[0]) {
				diffs = append(diffs, fmt.Sprintf("%s: admitfn denies by %s: %q; peer %v", n, policyName, msgs[0], t))
			}
		}
	}
	if len(theirs) != len(ours) {
		diffs = append(diffs, fmt.Sprintf("the peer decided %d reviews, admitfn %d", len(theirs), len(ours)))
	}
	return diffs
}

// profile, when set, receives a CPU profile of the timed rounds.
var profile *os.File

// benchAdmitfn is admitfn's time per review over the set, bytes in →
// decision out, as the peers' bench mode measures theirs.
func benchAdmitfn(e *engine.Engine, reviews []namedReview) float64 {
	ctx := context.Background()
	// Warm, as the peers are: what an engine does once (planning,
	// bounds) is not the measure.
	for range 3 {
		for _, r := range reviews {
			if _, err := decide(e, r.body); err != nil {
				fmt.Fprintln(os.Stderr, "bench-peers: admitfn:", err)
				os.Exit(1)
			}
		}
	}
	var failed error
	res := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			for _, r := range reviews {
				req, err := review.Decode(r.body)
				if err == nil {
					_, err = e.Review(ctx, validating, req)
				}
				if err != nil {
					failed = err
					b.FailNow()
				}
			}
		}
	})
	if failed != nil {
		fmt.Fprintln(os.Stderr, "bench-peers: admitfn:", failed)
		os.Exit(1)
	}
	return float64(res.T.Nanoseconds()) / float64(res.N) / float64(len(reviews))
}

func sameKeys(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func field(out, unit string) string {
	f := strings.Fields(out)
	for i := 1; i < len(f); i++ {
		if f[i] == unit {
			return f[i-1]
		}
	}
	return ""
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func rounded(xs []float64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(bytes.TrimSpace(exit.Stderr)) > 0 {
		return "\n" + string(exit.Stderr)
	}
	return ""
}
