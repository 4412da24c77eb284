package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/admitfn/admitfn/test/perf"
)

// W2: the shift-left job. The dump A1 reviews (a v1 List as kubectl get -A
// -o yaml prints it) through each engine's CLI, with the W1 policies:
// admitfn apply reads the List; kyverno apply stops on a List (a panic:
// "is not a list: no Items field") and gator test reads it as one object of
// kind List and reviews nothing, so both are given the same objects as a
// multi-document file, split before anything is timed. Every CLI must
// deny the same number of resources; each is timed by its wall time and
// peak resident memory, rounds alternating.

// w2Goal: admitfn's wall time at most half the fastest peer CLI's.
const w2Goal = 0.5

type cliRun struct {
	wall   time.Duration
	maxRSS int64 // KiB
	out    []byte
}

type w2Config struct {
	dir, admitfnBin, kyvernoBin, gatorBin, peersBin string
	files                                           []string
	objects, rounds                                 int
}

func w2(c w2Config) error {
	list := perf.ClusterDump(c.objects)
	listFile := filepath.Join(c.dir, "dump.yaml")
	if err := os.WriteFile(listFile, list, 0o644); err != nil {
		return err
	}
	docs, err := splitList(list)
	if err != nil {
		return err
	}
	docsFile := filepath.Join(c.dir, "dump-docs.yaml")
	if err := os.WriteFile(docsFile, docs, 0o644); err != nil {
		return err
	}
	bundle := filepath.Join(c.dir, "bundle")
	if err := writeBundle(bundle, c.files); err != nil {
		return err
	}
	forms := filepath.Join(c.dir, "forms")
	if out, err := exec.Command(c.peersBin, "-mode", "forms", "-policies", strings.Join(c.files, ","), "-out", forms).CombinedOutput(); err != nil {
		return fmt.Errorf("peers forms: %w\n%s", err, out)
	}
	clis := []struct {
		name   string
		args   []string
		denied func([]byte) (int, error)
	}{
		{"admitfn", []string{c.admitfnBin, "apply", "-p", bundle, "-f", listFile, "-o", "json"}, admitfnDenied},
		{"kyverno", []string{c.kyvernoBin, "apply", filepath.Join(forms, "kyverno.yaml"), "--resource", docsFile}, kyvernoDenied},
		{"gator", []string{c.gatorBin, "test", "-f", filepath.Join(forms, "gatekeeper"), "-f", docsFile, "-o", "json"}, gatorDenied},
	}
	runs := map[string][]cliRun{}
	wantDenied := -1
	for round := range c.rounds {
		for _, cli := range clis {
			r, err := timeCLI(cli.args)
			if err != nil {
				return fmt.Errorf("W2 %s: %w", cli.name, err)
			}
			if round == 0 {
				n, err := cli.denied(r.out)
				if err != nil {
					return fmt.Errorf("W2 %s's output: %w", cli.name, err)
				}
				fmt.Printf("W2 %s denies %d of %d resources\n", cli.name, n, c.objects)
				if cli.name == "admitfn" {
					wantDenied = n
				} else if n != wantDenied {
					return fmt.Errorf("W2 %s denies %d resources, admitfn %d", cli.name, n, wantDenied)
				}
			}
			r.out = nil
			runs[cli.name] = append(runs[cli.name], r)
		}
	}
	wall := func(name string) float64 {
		var xs []float64
		for _, r := range runs[name] {
			xs = append(xs, r.wall.Seconds())
		}
		return median(xs)
	}
	rss := func(name string) float64 {
		var xs []float64
		for _, r := range runs[name] {
			xs = append(xs, float64(r.maxRSS)/1024)
		}
		return median(xs)
	}
	fastest := ""
	for _, cli := range clis {
		fmt.Printf("W2 %s %.2f s wall, %.0f MiB peak RSS (median of %d)\n", cli.name, wall(cli.name), rss(cli.name), len(runs[cli.name]))
		if cli.name != "admitfn" && (fastest == "" || wall(cli.name) < wall(fastest)) {
			fastest = cli.name
		}
	}
	for _, cli := range clis[1:] {
		fmt.Printf("W2 admitfn/%s %.3g wall, %.3g peak RSS\n", cli.name, wall("admitfn")/wall(cli.name), rss("admitfn")/rss(cli.name))
	}
	ratio := wall("admitfn") / wall(fastest)
	verdict := "PASS"
	if ratio > w2Goal {
		verdict = "FAIL"
	}
	fmt.Printf("W2 %.3g target <=%g (fastest peer CLI: %s) %s\n", ratio, w2Goal, fastest, verdict)
	return nil
}

// timeCLI runs a CLI to its end and returns its wall time, peak RSS and
// standard output; exit 1 is a CLI's "something is denied", any other
// failure an error.
func timeCLI(args []string) (cliRun, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	r := cliRun{wall: time.Since(began), out: stdout.Bytes()}
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return r, fmt.Errorf("%v: %w\n%s", args, err, lastLines(stderr.String(), 5))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss
	}
	return r, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// splitList is a v1 List's items as a multi-document YAML stream.
func splitList(list []byte) ([]byte, error) {
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(list, &l); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, item := range l.Items {
		doc, err := yaml.JSONToYAML(item)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
	return out.Bytes(), nil
}

// writeBundle writes the policy files with a binding of each to every
// namespace.
func writeBundle(dir string, files []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		data, err := withEverywhereBinding(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func admitfnDenied(out []byte) (int, error) {
	var report struct {
		Summary struct {
			Denied *int `json:"denied"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return 0, err
	}
	if report.Summary.Denied == nil {
		return 0, errors.New("no summary.denied")
	}
	return *report.Summary.Denied, nil
}

// kyvernoFailed is a line of kyverno apply naming a resource a policy
// failed: "policy P -> resource NS/Kind/Name failed:".
var kyvernoFailed = regexp.MustCompile(`(?m)^policy \S+ -> resource (\S+) failed:$`)

func kyvernoDenied(out []byte) (int, error) {
	if !bytes.Contains(out, []byte("pass: ")) {
		return 0, fmt.Errorf("no summary in %q", lastLines(string(out), 3))
	}
	seen := map[string]bool{}
	for _, m := range kyvernoFailed.FindAllSubmatch(out, -1) {
		seen[string(m[1])] = true
	}
	return len(seen), nil
}

func gatorDenied(out []byte) (int, error) {
	var results []struct {
		Object struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		} `json:"violatingObject"`
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return 0, nil
	}
	if err := json.Unmarshal(out, &results); err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Object.Kind+"/"+r.Object.Metadata.Namespace+"/"+r.Object.Metadata.Name] = true
	}
	return len(seen), nil
}
