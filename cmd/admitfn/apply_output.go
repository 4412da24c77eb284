package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// applySummary counts resources by decision and results by outcome.
type applySummary struct {
	Resources int `json:"resources"`
	Allowed   int `json:"allowed"`
	Denied    int `json:"denied"`
	Errors    int `json:"errors"`
	Skipped   int `json:"skipped"`
	Pass      int `json:"pass"`
	Fail      int `json:"fail"`
	Warn      int `json:"warn"`
	Error     int `json:"error"`
}

func summarise(results []resourceResult) applySummary {
	s := applySummary{Resources: len(results)}
	for _, r := range results {
		switch r.Decision {
		case decisionAllowed:
			s.Allowed++
		case decisionDenied:
			s.Denied++
		case decisionError:
			s.Errors++
		case decisionSkipped:
			s.Skipped++
		}
		for _, rr := range r.Results {
			switch rr.Result {
			case "pass":
				s.Pass++
			case "fail":
				s.Fail++
			case "warn":
				s.Warn++
			case "error":
				s.Error++
			}
		}
	}
	return s
}

func (s applySummary) String() string {
	return fmt.Sprintf("%s: %d allowed, %d denied, %s, %d skipped; results: %d pass, %d fail, %d warn, %d error",
		plural(s.Resources, "resource"), s.Allowed, s.Denied, plural(s.Errors, "error"), s.Skipped, s.Pass, s.Fail, s.Warn, s.Error)
}

// applyReport is apply -o json.
func applyReport(results []resourceResult) any {
	return struct {
		Summary   applySummary     `json:"summary"`
		Resources []resourceResult `json:"resources"`
	}{summarise(results), results}
}

// writeApplyTable prints a row per resource under a header (decision,
// resource, operation, where it was read), then its results indented below
// it (pass results only as a count, unless they are all it has).
func (c *cli) writeApplyTable(results []resourceResult, showPatch bool) {
	colour := c.colour(c.out)
	paintResult := func(s string) string {
		return paint(colour, map[string]string{"fail": "red", "error": "red", "warn": "yellow", "pass": "green"}[s], fmt.Sprintf("%-5s", s))
	}
	wDecision, wResource, wOperation := len("DECISION"), len("RESOURCE"), len("OPERATION")
	for _, r := range results {
		wResource = max(wResource, len(r.Resource.String()))
		wOperation = max(wOperation, len(r.Operation))
	}
	row := func(decision, resource, operation, source string) string {
		// Padded before painting: colour codes have no width.
		line := fmt.Sprintf("%-*s  %-*s  %-*s  %s", wDecision, decision, wResource, resource, wOperation, operation, source)
		return strings.TrimRight(line, " ")
	}
	if len(results) > 0 {
		fmt.Fprintln(c.out, row("DECISION", "RESOURCE", "OPERATION", "SOURCE"))
	}
	for _, r := range results {
		source := ""
		if r.Resource.Line > 0 {
			source = fmt.Sprintf("%s:%d", r.Resource.File, r.Resource.Line)
		}
		line := row(strings.ToUpper(r.Decision), r.Resource.String(), r.Operation, source)
		switch r.Decision {
		case decisionDenied, decisionError:
			line = paint(colour, "red", line[:len(r.Decision)]) + line[len(r.Decision):]
		case decisionAllowed:
			line = paint(colour, "green", line[:len(r.Decision)]) + line[len(r.Decision):]
		}
		fmt.Fprintln(c.out, line)
		if r.Decision == decisionError || (r.Decision == decisionDenied && !hasFailure(r.Results)) {
			fmt.Fprintf(c.out, "  %s\n", indent(r.Message))
		}
		passed := 0
		for _, rr := range r.Results {
			if rr.Result == "pass" {
				passed++
				continue
			}
			fmt.Fprintf(c.out, "  %s %s %s: %s\n", paintResult(rr.Result), rr.Policy, rr.Rule(), indent(rr.Message))
		}
		if passed > 0 {
			fmt.Fprintf(c.out, "  %s %s\n", paintResult("pass"), plural(passed, "validation"))
		}
		for _, w := range r.Warnings {
			if !strings.HasPrefix(w, "Validation failed for ValidatingAdmissionPolicy ") {
				fmt.Fprintf(c.out, "  warning: %s\n", indent(w))
			}
		}
		if showPatch && len(r.Patch) > 0 {
			fmt.Fprintf(c.out, "  patch: %s\n", r.Patch)
		}
	}
	fmt.Fprintln(c.out, summarise(results))
}

func hasFailure(rs []ruleResult) bool {
	for _, r := range rs {
		if r.Result == "fail" || r.Result == "error" {
			return true
		}
	}
	return false
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

// writeApplyJUnit prints a JUnit suite per input file and a case per
// resource: a failure when denied, an error when the review failed,
// skipped when no webhook was called.
func writeApplyJUnit(w io.Writer, results []resourceResult) error {
	out := junitSuites{Name: "admitfn apply", Time: "0.000"}
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.Resource.File]
		if !ok {
			i = len(out.Suites)
			index[r.Resource.File] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.Resource.File, Time: "0.000"})
		}
		s := &out.Suites[i]
		jc := junitCase{Name: r.Resource.String(), ClassName: r.Resource.File, Time: "0.000"}
		var lines []string
		for _, rr := range r.Results {
			if rr.Result != "pass" {
				lines = append(lines, fmt.Sprintf("%s %s %s: %s", rr.Result, rr.Policy, rr.Rule(), rr.Message))
			}
		}
		switch r.Decision {
		case decisionDenied:
			jc.Failure = &junitProblem{Message: r.Message, Type: "denied", Text: strings.Join(lines, "\n")}
			s.Failures++
		case decisionError:
			jc.Error = &junitProblem{Message: r.Message, Type: "error", Text: r.Message}
			s.Errors++
		case decisionSkipped:
			jc.Skipped = &junitSkipped{Message: "namespace " + r.Resource.Namespace + " is not sent to the webhooks"}
		}
		s.Cases = append(s.Cases, jc)
		s.Tests++
		out.Tests++
	}
	for _, s := range out.Suites {
		out.Failures += s.Failures
		out.Errors += s.Errors
	}
	return out.write(w)
}

// The wgpolicyk8s.io/v1alpha2 reports, as the Policy WG's CRDs define them
// and policy-reporter reads them.
type policyReport struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   reportMetadata `json:"metadata"`
	Summary    reportSummary  `json:"summary"`
	Results    []reportResult `json:"results"`
}

type reportMetadata struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels"`
}

type reportSummary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

type reportResult struct {
	Source     string            `json:"source"`
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule"`
	Result     string            `json:"result"`
	Severity   string            `json:"severity,omitempty"`
	Scored     bool              `json:"scored"`
	Timestamp  reportTimestamp   `json:"timestamp"`
	Message    string            `json:"message,omitempty"`
	Resources  []reportResource  `json:"resources"`
	Properties map[string]string `json:"properties"`
}

type reportTimestamp struct {
	Seconds int64 `json:"seconds"`
	Nanos   int32 `json:"nanos"`
}

type reportResource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// The labels of admitfn's reports. A report is admitfn's, for one
// deployment, only when it carries both: apply --write-reports replaces and
// deletes no other.
const (
	managedByLabel  = "app.kubernetes.io/managed-by"
	deploymentLabel = "admitfn.io/deployment"
)

// defaultDeployment names the reports of an apply without --deployment.
const defaultDeployment = "admitfn"

// reportLabels are the labels of deployment's reports.
func reportLabels(deployment string) map[string]string {
	return map[string]string{managedByLabel: "admitfn", deploymentLabel: deployment}
}

// policyReports groups results into a PolicyReport per namespace and a
// ClusterPolicyReport for cluster-scoped resources, in namespace order,
// named after the deployment.
func policyReports(results []resourceResult, now time.Time, deployment string) []policyReport {
	byNS := map[string]*policyReport{}
	for _, r := range results {
		if len(r.Results) == 0 {
			continue // no policy reviewed it: nothing to report
		}
		rep := byNS[r.Resource.Namespace]
		if rep == nil {
			rep = &policyReport{APIVersion: "wgpolicyk8s.io/v1alpha2", Kind: "PolicyReport",
				Metadata: reportMetadata{Name: deployment, Namespace: r.Resource.Namespace, Labels: reportLabels(deployment)},
				Results:  []reportResult{}}
			if r.Resource.Namespace == "" {
				rep.Kind = "ClusterPolicyReport"
			}
			byNS[r.Resource.Namespace] = rep
		}
		res := reportResource{APIVersion: r.Resource.APIVersion, Kind: r.Resource.Kind, Namespace: r.Resource.Namespace, Name: r.Resource.Name, UID: r.Resource.UID}
		for _, rr := range r.Results {
			rep.Results = append(rep.Results, reportResult{
				Source: "admitfn", Policy: rr.Policy, Rule: rr.Rule(), Result: rr.Result, Severity: rr.Severity, Scored: true,
				Timestamp: reportTimestamp{Seconds: now.Unix()}, Message: rr.Message, Resources: []reportResource{res},
				Properties: map[string]string{"binding": rr.Binding, "validationActions": strings.Join(rr.Actions, ","), "operation": r.Operation},
			})
			switch rr.Result {
			case "pass":
				rep.Summary.Pass++
			case "fail":
				rep.Summary.Fail++
			case "warn":
				rep.Summary.Warn++
			case "error":
				rep.Summary.Error++
			}
		}
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	out := make([]policyReport, 0, len(namespaces))
	for _, ns := range namespaces {
		out = append(out, *byNS[ns])
	}
	return out
}

// writePolicyReports prints the reports as YAML documents, ready for
// kubectl apply -f.
func writePolicyReports(w io.Writer, results []resourceResult, now time.Time, deployment string) error {
	for i, rep := range policyReports(results, now, deployment) {
		doc, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(doc); err != nil {
			return err
		}
	}
	return nil
}
