package httpadapter

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/test/soak"
)

// BenchmarkGoldenReviews: the handler serving the example bundle's golden
// reviews in turn, logging as the server does (to nowhere): what a review
// costs the server beyond the network.
func BenchmarkGoldenReviews(b *testing.B) {
	benchmarkGolden(b, func(soak.Case) bool { return true })
}

// BenchmarkGoldenMutations: the golden reviews of the mutating routes alone,
// where the answer's JSON Patch is computed.
func BenchmarkGoldenMutations(b *testing.B) {
	benchmarkGolden(b, func(c soak.Case) bool { return strings.HasPrefix(c.Route, "/mutate") })
}

func benchmarkGolden(b *testing.B, keep func(soak.Case) bool) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		b.Fatal(err)
	}
	all, err := soak.ExampleCases("testdata", "../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	var cases []soak.Case
	for _, c := range all {
		if keep(c) {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		b.Fatal("no golden reviews")
	}
	h := New(eng, zerolog.New(io.Discard))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := cases[i%len(cases)]
		i++
		if code, body := c.ServeIn(h); code != http.StatusOK {
			b.Fatalf("%s: HTTP %d: %s", c.Name, code, body)
		}
	}
}
