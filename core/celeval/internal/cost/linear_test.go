package cost

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// refStack is cel-go's refValStack, searched from the top.
type refStack []stackVal

func (s *refStack) take(id int64) (ref.Val, bool) {
	for i := len(*s) - 1; i >= 0; i-- {
		if (*s)[i].id == id {
			v := (*s)[i].val
			*s = (*s)[:i]
			return v, true
		}
	}
	return nil, false
}

// The tracker's indexed stack finds, removes and keeps what cel-go's
// searched one does, for any sequence of pushes and searches, ids repeated
// or never pushed, and ids outside the index.
func TestLinearTrackerStack(t *testing.T) {
	ids := []int64{0, 1, 2, 3, 7, 40, -1, indexed, indexed + 5}
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		lt, ref := newLinearTracker(), refStack{}
		for step := range 300 {
			id := ids[r.IntN(len(ids))]
			if r.IntN(3) > 0 {
				v := types.Int(step)
				lt.push(v, id)
				ref = append(ref, stackVal{val: v, id: id})
				continue
			}
			got, gotOK := lt.take(id)
			want, wantOK := ref.take(id)
			if gotOK != wantOK || got != want || len(lt.stack) != len(ref) {
				t.Fatalf("seed %d, step %d: take(%d) = %v, %v, %d left; cel-go's %v, %v, %d left", seed, step, id, got, gotOK, len(lt.stack), want, wantOK, len(ref))
			}
		}
		lt.release()
	}
	if lt := newLinearTracker(); len(lt.stack) != 0 || slices.ContainsFunc(lt.top, func(p int32) bool { return p != -1 }) {
		t.Fatalf("a released tracker keeps %d values, index %v", len(lt.stack), lt.top)
	}
}
