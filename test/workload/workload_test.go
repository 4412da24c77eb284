package workload

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/doccheck"
)

// Bundles are what the workload is played against.
var Bundles = []string{"../../policies/examples", "../../policies/library"}

// The workload played against each bundle: push-down skips only calls no
// binding acts on, and skips some.
func TestPushDownOnTheWorkload(t *testing.T) {
	// docs/performance.md's table, which TestPushDownWorkload (e2e)
	// holds to what kube-apiserver sends.
	want := map[string][2]Tally{
		"../../policies/examples": {{27, 6}, {21, 0}},
		"../../policies/library":  {{36, 6}, {30, 0}},
	}
	var off, on Tally
	for _, dir := range Bundles {
		a, b := count(t, dir, false), count(t, dir, true)
		if got := [2]Tally{a, b}; got != want[dir] {
			t.Errorf("%s: calls (idle) without and with push-down %v, want %v", dir, got, want[dir])
		}
		if b.Calls > a.Calls || a.Calls-b.Calls != a.Idle-b.Idle {
			t.Errorf("%s: push-down removed %d calls, %d of them idle: every call it removes must be idle", dir, a.Calls-b.Calls, a.Idle-b.Idle)
		}
		off, on = off.Add(a), on.Add(b)
	}
	if on.Calls >= off.Calls {
		t.Errorf("push-down saved no call: %d with, %d without", on.Calls, off.Calls)
	}
}

// The workload's mix, by author, verb and resource, is the one
// docs/performance.md shows.
func TestWorkloadMix(t *testing.T) {
	block := doccheck.Find(t, "docs/performance.md", 1)[0]
	counts := map[string]int{}
	writes := Default().Writes()
	system := 0
	for _, w := range writes {
		res := w.Resource.Resource
		if w.Subresource != "" {
			res += "/" + w.Subresource
		}
		counts[w.Actor+" "+w.Verb+" "+res]++
		if strings.HasPrefix(w.As.User, "system:") {
			system++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var lines []string
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%d %s", counts[k], k))
	}
	got := fmt.Sprintf("%d writes, %d by nodes and controllers (system: users)\n%s\n", len(writes), system, strings.Join(lines, "\n"))
	if got != block.Text {
		t.Errorf("%s shows\n%s\nthe workload is\n%s", block, block.Text, got)
	}
}

// BenchmarkD1PushDownCalls reports, on the workload played against the
// example bundle and the policy library, the calls the function receives
// with push-down ÷ without, the least that ratio can be (the share of
// calls a binding acts on), and the share of calls no binding acts on
// (wasted) without and with.
func BenchmarkD1PushDownCalls(b *testing.B) {
	var off, on Tally
	for range b.N {
		off, on = Tally{}, Tally{}
		for _, dir := range Bundles {
			off, on = off.Add(count(b, dir, false)), on.Add(count(b, dir, true))
		}
	}
	b.ReportMetric(float64(on.Calls)/float64(off.Calls), "calls-ratio")
	b.ReportMetric(1-off.Waste(), "calls-floor")
	b.ReportMetric(off.Waste(), "wasted-before")
	b.ReportMetric(on.Waste(), "wasted-after")
	b.ReportMetric(float64(off.Calls), "calls-before")
	b.ReportMetric(float64(on.Calls), "calls-after")
}

func count(tb testing.TB, dir string, pushDown bool) Tally {
	tb.Helper()
	set, err := Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	t, err := Count(set, pushDown)
	if err != nil {
		tb.Fatalf("%s: %v", dir, err)
	}
	return t
}
