package review

import (
	"testing"

	"github.com/admitfn/admitfn/test/perf"
)

// BenchmarkDecode decodes the ~8 KB Pod review of the performance measures.
func BenchmarkDecode(b *testing.B) {
	body := perf.PodReview()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}
