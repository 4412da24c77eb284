package workload

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Bundles are what the workload is played against.
var Bundles = []string{"../../policies/examples", "../../policies/library"}

// The workload played against each bundle: push-down skips only calls no
// binding acts on, and skips some.
func TestPushDownOnTheWorkload(t *testing.T) {
	var off, on Tally
	for _, dir := range Bundles {
		a, b := count(t, dir, false), count(t, dir, true)
		t.Logf("%s: %d calls (%d idle) without push-down, %d (%d idle) with", dir, a.Calls, a.Idle, b.Calls, b.Idle)
		if b.Calls > a.Calls || a.Calls-b.Calls != a.Idle-b.Idle {
			t.Errorf("%s: push-down removed %d calls, %d of them idle: every call it removes must be idle", dir, a.Calls-b.Calls, a.Idle-b.Idle)
		}
		off, on = off.Add(a), on.Add(b)
	}
	if on.Calls >= off.Calls {
		t.Errorf("push-down saved no call: %d with, %d without", on.Calls, off.Calls)
	}
}

// The workload's mix, by actor and resource, is the one docs/cluster.md
// shows.
func TestWorkloadMix(t *testing.T) {
	counts := map[string]int{}
	writes := Default().Writes()
	for _, w := range writes {
		res := w.Resource.Resource
		if w.Subresource != "" {
			res += "/" + w.Subresource
		}
		counts[w.Actor+" "+w.Verb+" "+res]++
	}
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%4d %s", n, k))
	}
	sort.Strings(lines)
	t.Logf("%d writes:\n%s", len(writes), strings.Join(lines, "\n"))
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
