package warmbench

import (
	"os"
	"slices"
	"testing"
	"time"
)

// Requests go to the processes in turn, request by request.
func TestAlternate(t *testing.T) {
	var got []string
	send := func(name string) func(int) {
		return func(i int) { got = append(got, name+string(rune('0'+i))) }
	}
	Alternate(3, Process{Name: "a", Send: send("a")}, Process{Name: "b", Send: send("b")})
	if want := []string{"a0", "b0", "a1", "b1", "a2", "b2"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// Compare reports CPU, wall time and memory for both, and the ratio, under
// the names it says; here both are this process, each request 1 ms of
// spinning.
func TestCompareReports(t *testing.T) {
	spin := func(int) {
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
		}
	}
	self := os.Getpid()
	res := testing.Benchmark(func(b *testing.B) {
		Compare(b, 20, Process{Name: "p", Pid: self, Send: spin}, Process{Name: "base", Pid: self, Send: spin})
	})
	for _, name := range []string{"x-base", "p-cpu-µs/op", "base-cpu-µs/op", "p-wall-µs/op", "base-wall-µs/op", "p-rss-MiB", "base-rss-MiB"} {
		if _, ok := res.Extra[name]; !ok {
			t.Errorf("no %s in %v", name, res.Extra)
		}
	}
	// At least the millisecond spun; below a second (a unit slip to ns
	// would read a million).
	if w := res.Extra["p-wall-µs/op"]; w < 1000 || w >= 1e6 {
		t.Errorf("wall %v µs per 1 ms request", w)
	}
	if rss := res.Extra["base-rss-MiB"]; rss <= 0 {
		t.Errorf("rss %v MiB", rss)
	}
}
