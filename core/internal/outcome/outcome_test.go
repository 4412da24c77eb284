package outcome

import (
	"context"
	"slices"
	"testing"
)

// A trace keeps each failed policy once, in order, and whether a binding
// acted; a context without one records nothing.
func TestTrace(t *testing.T) {
	Failure(context.Background(), "a") // no trace: nothing to record, no panic
	Acted(context.Background())
	ctx, tr := WithTrace(context.Background())
	if tr.Acted() || len(tr.Failed()) != 0 {
		t.Fatalf("a new trace: %v, %v", tr.Acted(), tr.Failed())
	}
	for _, p := range []string{"b", "a", "b"} {
		Failure(ctx, p)
	}
	Acted(ctx)
	if !tr.Acted() || !slices.Equal(tr.Failed(), []string{"b", "a"}) {
		t.Errorf("trace: acted %v, failed %v; want true, [b a]", tr.Acted(), tr.Failed())
	}
}
