package parallel

import (
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
)

func TestMapKeepsOrderAndCallsOnce(t *testing.T) {
	in := make([]int, 1000)
	for i := range in {
		in[i] = i
	}
	var calls atomic.Int64
	out := Map(in, func(i int) string {
		calls.Add(1)
		return strconv.Itoa(i * 2)
	})
	want := make([]string, len(in))
	for i := range in {
		want[i] = strconv.Itoa(i * 2)
	}
	if !slices.Equal(out, want) || calls.Load() != int64(len(in)) {
		t.Fatalf("%d calls, results in order: %v", calls.Load(), slices.Equal(out, want))
	}
	if got := Map([]int(nil), func(int) int { return 1 }); len(got) != 0 {
		t.Fatalf("empty input: %v", got)
	}
}
