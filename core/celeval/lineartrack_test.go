package celeval

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
	"github.com/admitfn/admitfn/core/celeval/internal/objectval"
)

// The linear tracker charges what cel-go's tracker charges, step by step:
// the same value or error, the same cost, and the same point of
// cancellation at the per-call limit, for every kind of step cel-go's
// observer tells apart (attributes and qualifiers, conditional attributes,
// presence tests, logical operators, comprehensions, constructors, calls
// priced by Kubernetes' estimator, by cel-go's overload trackers and by its
// defaults, and the planner's optimisations of constants, set membership
// and regular expressions).
func TestLinearTrackerMatchesCelGo(t *testing.T) {
	if _, err := cost.LinearOption(); err != nil {
		t.Fatalf("cel-go's program no longer has the fields linear tracking reads: %v", err)
	}
	long := strings.Repeat("x", 10000)
	req := decodePod(t)
	pod := &activation{object: objectval.Of(req.Object.Object), oldObject: objectval.Of(req.Object.Object)}
	strs := &activation{object: objectval.Of(map[string]any{"s": long, "t": long + "x", "l": []any{"a", "b", "a"}})}
	for _, c := range []struct {
		expr string
		act  *activation
	}{
		{`object.metadata.name.startsWith('web') && object.spec.containers.size() == 2`, pod},
		{`object.missing == 1 || has(object.spec.nodeName) || has(object.metadata.labels)`, pod},
		{`(has(object.spec.hostNetwork) ? object.spec.hostNetwork : object.spec.enableServiceLinks) != true`, pod},
		{`(size(object.spec.containers) > 1 ? object.metadata : object.spec).name == 'x'`, pod},
		{`[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2`, pod},
		{`object.spec.containers.all(c, c.image.contains(':') && !c.image.endsWith(':latest'))`, pod},
		{`object.spec.containers.exists_one(c, c.name == object.spec.containers[0].name)`, pod},
		{`object.spec.containers.map(c, c.name).exists(n, n in ['web', 'api', 'sidecar'])`, pod},
		{`{'a': [object.metadata.name], 'b': [object.spec.containers[0].name]}.b[0] != ''`, pod},
		{`object.metadata.name.matches('^[a-z]+-[0-9a-z]+$') && object.metadata.name.matches(object.metadata.name)`, pod},
		{`object.?metadata.?labels.orValue({}).size() >= 0 && object.?spec.?nope.hasValue() == false`, pod},
		{`object.metadata.name + '-' + string(object.spec.containers.size()) != ''`, pod},
		{`lists.range(40).reverse().distinct().size() == 40 && [[1], [2, 3]].flatten().size() == 3`, pod},
		{`sets.contains([1, 2, 3], [1]) && sets.intersects([1], [1, 2])`, pod},
		{`object.spec.containers.map(c, c.resources.?limits.?memory.orValue('0')).all(q, quantity(q).isGreaterThan(quantity('1Ki')) || q == '0')`, pod},
		{`object.metadata.annotations.all(k, k.size() < 100 && object.metadata.annotations[k].size() >= 0)`, pod},
		{`object.spec.containers[5].name == 'x'`, pod},
		{`object.l.sort() == ['a', 'a', 'b'] && object.l.join(',').size() == 5`, strs},
		// The per-call limit: contains costs a tenth of each length,
		// multiplied, one million and more here.
		{`object.s.contains(object.t)`, strs},
		{`object.s.size() > 0 && object.s.contains(object.t)`, strs},
	} {
		p := compileBounded(t, c.expr)
		want, det, wantErr := p.ContextEval(context.Background(), c.act)
		if det == nil || det.ActualCost() == nil {
			t.Fatalf("%s: cel-go tracked no cost", c.expr)
		}
		if p.linearProgram() == nil {
			t.Fatalf("%s: no linear program", c.expr)
		}
		got, cost, ok, gotErr := evalTracked(context.Background(), int64(p.linearFrom), c.act, p)
		if !ok || cost == nil {
			t.Fatalf("%s: the linear tracker reported no cost", c.expr)
		}
		if *cost != *det.ActualCost() || describe(got, gotErr) != describe(want, wantErr) {
			t.Errorf("%s: linear %s, cost %d; cel-go %s, cost %d", c.expr, describe(got, gotErr), *cost, describe(want, wantErr), *det.ActualCost())
		}
	}
}

func describe(v ref.Val, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	if v == nil {
		return "nil"
	}
	if types.IsError(v) {
		return fmt.Sprint("error value ", v)
	}
	return fmt.Sprintf("%v (%s)", v.Value(), v.Type().TypeName())
}

// Below the threshold, and with a negative one, evaluation is cel-go's.
func TestLinearTrackingThreshold(t *testing.T) {
	req := decodePod(t)
	act := &activation{object: objectval.Of(req.Object.Object)}
	p := compileBounded(t, `object.spec.containers.all(c, c.name != '')`)
	if p.linearFrom != DefaultLinearTrackingFrom {
		t.Fatalf("threshold %d, want the default %d", p.linearFrom, DefaultLinearTrackingFrom)
	}
	if _, _, ok, _ := evalTracked(context.Background(), int64(p.linearFrom)-1, act, p); !ok || p.linear != nil {
		t.Errorf("below the threshold: planned a linear program (%v)", p.linear != nil)
	}
	if _, _, ok, _ := evalTracked(context.Background(), int64(p.linearFrom), act, p); !ok || p.linear == nil {
		t.Errorf("at the threshold: no linear program")
	}
	p = compileBounded(t, `object.spec.containers.all(c, c.name != '')`, linearTrackingFrom(-1))
	if _, _, ok, _ := evalTracked(context.Background(), 1<<40, act, p); !ok || p.linear != nil {
		t.Errorf("never: planned a linear program")
	}
}
