// Command peers runs the work of make bench-peers (docs/performance.md,
// "Against the alternatives") through another policy engine's own public
// entry point, in a module of its own so that the engines' dependency
// graphs never touch admitfn's:
//
//   - kyverno: Kyverno's ValidatingPolicy engine
//     (github.com/kyverno/kyverno/pkg/cel/policies/vpol/engine: NewProvider,
//     NewEngine, Handle), as its admission webhook calls it;
//   - gatekeeper: Gatekeeper's constraint client with its
//     K8sNativeValidation (CEL) driver
//     (github.com/open-policy-agent/frameworks/constraint/pkg/client,
//     github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel), as its
//     validating webhook calls it.
//
// Each engine is given the checks of admitfn's ValidatingAdmissionPolicies
// in its own form (forms.go) and reviews each AdmissionReview of the work
// file from its bytes. -mode decisions prints, for every review, the
// messages of each policy that denied it; -mode bench prints the time one
// pass over the work took, as a Go benchmark measures it; -mode forms
// writes each peer's form of the policies for its CLI (kyverno apply,
// gator test).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// work is what make bench-peers hands every engine: AdmissionReviews, by
// name, as kube-apiserver sends them.
type work struct {
	Reviews []struct {
		Name   string          `json:"name"`
		Review json.RawMessage `json:"review"`
	} `json:"reviews"`
}

// decider reviews one AdmissionReview's bytes and returns, for each policy
// that denied it, its messages.
type decider interface {
	decide(ctx context.Context, body []byte) (map[string][]string, error)
}

func main() {
	engineName := flag.String("engine", "", "kyverno or gatekeeper")
	policies := flag.String("policies", "", "admitfn's ValidatingAdmissionPolicy files, comma-separated")
	workFile := flag.String("work", "", "the work file")
	mode := flag.String("mode", "decisions", "decisions, bench, or forms (each peer's form of the policies, into -out)")
	out := flag.String("out", "", "the directory -mode forms writes")
	flag.Parse()
	if *mode == "forms" {
		vaps, err := readPolicies(strings.Split(*policies, ","))
		if err == nil {
			err = writeForms(vaps, *out)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*engineName, strings.Split(*policies, ","), *workFile, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(engineName string, policyFiles []string, workFile, mode string) error {
	vaps, err := readPolicies(policyFiles)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(workFile)
	if err != nil {
		return err
	}
	var w work
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("%s: %w", workFile, err)
	}
	if len(w.Reviews) == 0 {
		return fmt.Errorf("%s: no reviews", workFile)
	}
	var d decider
	switch engineName {
	case "kyverno":
		d, err = newKyverno(vaps)
	case "gatekeeper":
		d, err = newGatekeeper(vaps)
	default:
		return fmt.Errorf("-engine %q: kyverno or gatekeeper", engineName)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", engineName, err)
	}
	ctx := context.Background()
	switch mode {
	case "decisions":
		out := map[string]map[string][]string{}
		for _, r := range w.Reviews {
			denied, err := d.decide(ctx, r.Review)
			if err != nil {
				return fmt.Errorf("%s: %w", r.Name, err)
			}
			for _, msgs := range denied {
				sort.Strings(msgs)
			}
			out[r.Name] = denied
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "bench":
		// Warm, as admitfn is: what an engine does once is not the
		// measure.
		for range 3 {
			for _, r := range w.Reviews {
				if _, err := d.decide(ctx, r.Review); err != nil {
					return fmt.Errorf("%s: %w", r.Name, err)
				}
			}
		}
		var failed error
		res := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range w.Reviews {
					if _, err := d.decide(ctx, r.Review); err != nil {
						failed = err
						b.FailNow()
					}
				}
			}
		})
		if failed != nil {
			return failed
		}
		perReview := float64(res.T.Nanoseconds()) / float64(res.N) / float64(len(w.Reviews))
		fmt.Printf("%s %d passes %.0f ns/review %d B/pass %d allocs/pass\n", engineName, res.N, perReview, res.AllocedBytesPerOp(), res.AllocsPerOp())
		return nil
	}
	return fmt.Errorf("-mode %q: decisions or bench", mode)
}
