package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/perf"
)

// The decisions check fails on every way a peer can differ: a review only
// one denies, another denying policy, and admitfn's message missing from
// the peer's; a peer that reports every failed validation agrees.
func TestCompare(t *testing.T) {
	ours := map[string]map[string][]string{
		"allowed": {},
		"denied":  {"restricted": {"no privilege escalation"}},
	}
	for _, c := range []struct {
		name   string
		theirs map[string]map[string][]string
		diffs  int
	}{
		{"the same", map[string]map[string][]string{"allowed": {}, "denied": {"restricted": {"no privilege escalation"}}}, 0},
		{"every failure reported", map[string]map[string][]string{"allowed": {}, "denied": {"restricted": {"no privilege escalation", "run as non-root"}}}, 0},
		{"allows what admitfn denies", map[string]map[string][]string{"allowed": {}, "denied": {}}, 1},
		{"denies what admitfn allows", map[string]map[string][]string{"allowed": {"baseline": {"x"}}, "denied": {"restricted": {"no privilege escalation"}}}, 1},
		{"another policy denies", map[string]map[string][]string{"allowed": {}, "denied": {"baseline": {"no privilege escalation"}}}, 1},
		{"another message", map[string]map[string][]string{"allowed": {}, "denied": {"restricted": {"run as non-root"}}}, 1},
		{"a review missing", map[string]map[string][]string{"denied": {"restricted": {"no privilege escalation"}}}, 1},
	} {
		if got := compare(ours, c.theirs); len(got) != c.diffs {
			t.Errorf("%s: %d differences %v, want %d", c.name, len(got), got, c.diffs)
		}
	}
}

// admitfn's side of W1 decides the library's own test cases as the test
// file expects, profile by profile: the reviews and the engines the peers
// are compared with are the ones the library is tested with.
func TestW1AdmitfnDecisions(t *testing.T) {
	lib := filepath.Join(perf.RepoRoot(), "policies", "library", "pod-security")
	reviews, err := w1Reviews(filepath.Join(lib, "pod-security_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(reviews) < 30 || reviews[0].name != "p1-pod" {
		t.Fatalf("%d reviews, the first %q: want P1's Pod and the test file's Pods", len(reviews), reviews[0].name)
	}
	restricted, err := w1Engine(filepath.Join(lib, "policy-restricted.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	both, err := w1Engine(filepath.Join(lib, profiles[0]), filepath.Join(lib, profiles[1]))
	if err != nil {
		t.Fatal(err)
	}
	byName := func(name string) []byte {
		i := slices.IndexFunc(reviews, func(r namedReview) bool { return r.name == name })
		if i < 0 {
			t.Fatalf("no review %q", name)
		}
		return reviews[i].body
	}
	got, err := decide(restricted, byName("a plain pod fails restricted"))
	if err != nil {
		t.Fatal(err)
	}
	want := `allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false)`
	if msgs := got["pod-security-restricted.admitfn.io"]; len(got) != 1 || len(msgs) != 1 || msgs[0] != want {
		t.Errorf("a plain pod under restricted: %v, want %q", got, want)
	}
	for _, name := range []string{"p1-pod", "a restricted pod passes restricted"} {
		if got, err := decide(both, byName(name)); err != nil || len(got) != 0 {
			t.Errorf("%s: denied %v, %v; want allowed", name, got, err)
		}
	}
	if _, err := decide(both, []byte(`{"kind":"AdmissionReview"}`)); err == nil || !strings.Contains(err.Error(), "malformed AdmissionReview") {
		t.Errorf("a malformed review: %v, want an error", err)
	}
}

// W2's readers of each CLI's output count denied resources as each CLI
// reports them, and the List is split into the same objects.
func TestW2Outputs(t *testing.T) {
	if n, err := admitfnDenied([]byte(`{"summary": {"resources": 3, "denied": 2}}`)); err != nil || n != 2 {
		t.Errorf("admitfn: %d, %v", n, err)
	}
	if _, err := admitfnDenied([]byte(`{"summary": {}}`)); err == nil {
		t.Error("admitfn: a report without summary.denied read as none denied")
	}
	kyverno := "policy a -> resource ns-1/Pod/p failed:\n1 - x\npolicy b -> resource ns-1/Pod/p failed:\n1 - y\n" +
		"policy a -> resource ns-2/Deployment/d failed:\n1 - x\n\npass: 3, fail: 3, warn: 0, error: 0, skip: 0 \n"
	if n, err := kyvernoDenied([]byte(kyverno)); err != nil || n != 2 {
		t.Errorf("kyverno: %d, %v", n, err)
	}
	if _, err := kyvernoDenied([]byte("panic: not a list")); err == nil {
		t.Error("kyverno: an output without its summary read as none denied")
	}
	gator := `[{"msg": "x", "violatingObject": {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns-1"}}},
		{"msg": "y", "violatingObject": {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns-1"}}},
		{"msg": "x", "violatingObject": {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns-2"}}}]`
	if n, err := gatorDenied([]byte(gator)); err != nil || n != 2 {
		t.Errorf("gator: %d, %v", n, err)
	}
	docs, err := splitList(perf.ClusterDump(60))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(docs), "---\n"); n != 60 {
		t.Errorf("the List split into %d documents, want 60", n)
	}
	if !strings.Contains(string(docs), "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    environment: test\n  name: ns-0\n") {
		t.Errorf("the first document is not the first item:\n%.300s", docs)
	}
}
