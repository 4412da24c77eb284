package validate

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy/testpolicies"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/review/reviewtest"
)

// The cost bound (celeval/internal/cost) lets a set be evaluated without
// cost tracking only where tracking could not have stopped it. Each policy
// runs with exact cost and with bounds, on budgets of the default, the
// exact cost spent, one less and half: a bound below the cost spent would
// evaluate untracked where exact tracking runs out of budget, and the two
// would differ (agrees). The bounded sets run twice, as a set's first
// evaluation is always tracked. Each runs tracked by the linear tracker
// too (celeval/internal/cost/linear.go), which must leave exactly the budgets
// cel-go's tracker leaves.
func TestCostBoundAgreesWithExactCost(t *testing.T) {
	repo, err := testpolicies.Repository("../..")
	if err != nil {
		t.Fatal(err)
	}
	parity, err := testpolicies.File("testdata/variables-parity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policies := append(append(repo.Validating, parity.Validating...), boundCorpus()...)
	c := newBoundPair(t, policies)
	var untracked int
	for _, req := range []*review.Request{decodePod(t), decode(t)} {
		untracked += c.compare(t, req, true)
	}
	// Lists long enough that nested comprehensions pass the per-call limit
	// and their bounds, with every function of the corpus.
	corpus := newBoundPair(t, boundCorpus())
	untracked += corpus.compare(t, withObject(t, decodePod(t), bigObject), true)
	// Every list and string as long as its size class allows: a bound
	// that misses a size shows here, where rounding leaves no slack.
	untracked += corpus.compare(t, withObject(t, decodePod(t), saturatedObject), true)
	t.Logf("%d policies, %d condition sets evaluated untracked", len(policies), untracked)
	if untracked < 100 {
		t.Errorf("%d sets evaluated untracked: the bound no longer proves what it should", untracked)
	}
}

// FuzzCostBound: the same on any object, for the corpus of expressions
// that reaches every function the bound sizes.
func FuzzCostBound(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"n","labels":{"a":"b"}},"a":["x","yy",""],"s":"a,b,,c","h":"example.com:8080/p?q=1&q=2","q":"100Mi"}`,
		`{"a":[[1,2],[3]],"b":{"c":{"d":"e"}},"s":"\u00e9\u00e9","n":1.5}`,
		`{"a":[{"b":[1,2,3]},{"b":"s"}],"s":"` + strings.Repeat("ab", 300) + `"}`,
		`{}`,
	} {
		f.Add(seed)
	}
	c := newBoundPair(f, boundCorpus())
	base := reviewtest.Read(f, "../celeval/testdata/scale-review.json")
	// The thorough comparison once, on the first input's test: what it
	// finds fails that input.
	var warm sync.Once
	f.Fuzz(func(t *testing.T, obj string) {
		// Small objects keep each input quick: a few kilobytes of list
		// make the corpus's nested comprehensions run for seconds,
		// tracked, and sizes are what the bound reads, not bytes.
		if len(obj) > 512 {
			return
		}
		warm.Do(func() { c.compare(t, base, true) })
		req, ok := tryWithObject(base, obj)
		if !ok {
			return
		}
		c.compare(t, req, false)
	})
}

// bigObject has lists and strings long enough for nested comprehensions'
// bounds to pass the per-call limit.
var bigObject = `{"metadata":{"name":"big"},"a":[` + strings.Repeat(`"`+strings.Repeat("x", 40)+`",`, 400) + `"y"],"s":"` + strings.Repeat("z", 5000) + `"}`

// saturatedObject's lists and maps have 32 entries (the smallest class)
// and its strings, keys included, 1,024 bytes, the largest of their
// classes; one map nests maps and lists three deep.
var saturatedObject = func() string {
	long := strings.Repeat("x", 1024)
	list := `"` + long + `"` + strings.Repeat(`,"`+long+`"`, 31)
	nested := `{"` + long + `":[{"b":[` + list + `]}]}`
	return `{"metadata":{"name":"` + long + `"},"a":[` + list + `],"s":"` + long + `","h":"` + long +
		`","` + strings.Repeat("k", 1024) + `":` + nested + `,"b":{"c":{"d":"` + long + `"}}}`
}()

// boundCorpus: one policy per expression, its value a variable the
// validation reads in full.
func boundCorpus() []*admissionregistrationv1.ValidatingAdmissionPolicy {
	var out []*admissionregistrationv1.ValidatingAdmissionPolicy
	for i, e := range boundExprs {
		out = append(out, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bound-%d", i)},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
				Variables: []admissionregistrationv1.Variable{{Name: "v", Expression: e}},
				Validations: []admissionregistrationv1.Validation{{
					Expression:        "variables.v == variables.v",
					MessageExpression: "'v is ' + string(type(variables.v))",
				}},
				AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "v", ValueExpression: "string(type(variables.v))"}},
			},
		})
	}
	return out
}

var boundExprs = []string{
	`object`,
	`object == oldObject`,
	`object.?metadata.?name.orValue('')`,
	`object.?metadata.?name.orValue('').lowerAscii() + object.?metadata.?name.orValue('').upperAscii()`,
	`object.?s.orValue('').trim()`,
	`object.?s.orValue('').substring(0, 1)`,
	`object.?s.orValue('').charAt(0)`,
	`object.?s.orValue('').indexOf('b') + object.?s.orValue('').lastIndexOf('b')`,
	`object.?s.orValue('').split(',')`,
	`object.?s.orValue('').split(',', 2)`,
	`object.?s.orValue('').split(',').map(x, x.size())`,
	`strings.quote(object.?s.orValue(''))`,
	`object.?s.orValue('').find('[a-z]+')`,
	`object.?s.orValue('').findAll('[a-z]')`,
	`object.?s.orValue('').findAll('[a-z]', 2)`,
	`object.?s.orValue('').matches('^[a-z,]*$')`,
	`object.?s.orValue('').contains('ab') && object.?s.orValue('').startsWith('a') && object.?s.orValue('').endsWith('b')`,
	`object.?s.orValue('') + object.?s.orValue('') + object.?s.orValue('')`,
	`bytes(object.?s.orValue(''))`,
	`string(bytes(object.?s.orValue('')))`,
	`string(object.?n.orValue(1))`,
	`string(size(object))`,
	`dyn(object.?a.orValue([])).map(x, [x, x])`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string)`,
	`dyn(object.?a.orValue([])).exists_one(x, x == 'x')`,
	`dyn(object.?a.orValue([])) + dyn(object.?a.orValue([]))`,
	`[object, oldObject, object.?a.orValue(null)]`,
	`{'a': object, 'b': object.?a.orValue(null)}`,
	`dyn(object.?a.orValue([])).slice(0, 1)`,
	`dyn(object.?a.orValue([])).distinct()`,
	`dyn(object.?a.orValue([])).reverse()`,
	`dyn(object.?a.orValue([])).first()`,
	`dyn(object.?a.orValue([])).last().orValue(null)`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string).map(x, string(x)).sort()`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string).map(x, string(x)).sortBy(x, x.size()).map(x, x.lowerAscii())`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == list).map(x, dyn(x)).flatten()`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string).map(x, string(x)).max()`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string).map(x, string(x)).isSorted()`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == int).map(x, int(x)).sum()`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string).map(x, string(x)).indexOf('x')`,
	// exists_one never stops early: over a map's keys, where it stopped
	// would follow Go's map order, and the cost with it.
	`dyn(object.?a.orValue([])).all(x, dyn(object.?a.orValue([])).exists_one(y, x == y))`,
	`dyn(object.?a.orValue([])).all(i, x, i >= 0)`,
	`dyn(object.?a.orValue([])).transformList(i, x, [i, x])`,
	`object.map(k, k)`,
	`object.filter(k, k.startsWith('a'))`,
	`object.transformMap(k, v, [v])`,
	`object.transformMapEntry(k, v, {k + 'x': v})`,
	`object.all(k, v, type(k) == string)`, // never stops early: map order would change its cost
	`object.?a.?b.orValue(object)`,
	`object.?b.?c.?d.orValue('')`,
	`object[?'a'].orValue([])`,
	`dyn(object.?a.orValue([]))[?0].orValue('none')`,
	`optional.of(object).value()`,
	`optional.ofNonZeroValue(object.?s.orValue('')).or(optional.of('x')).value()`,
	`optional.none().orValue(object)`,
	`[optional.of(object), optional.none()].map(o, o.orValue(null))`,
	`cel.bind(x, object.?a.orValue([]), [x, x])`,
	`cel.bind(x, object.?s.orValue(''), x + x)`,
	`sets.contains(dyn(object.?a.orValue([])), ['x']) || sets.intersects(dyn(object.?a.orValue([])), ['x'])`,
	`sets.equivalent(dyn(object.?a.orValue([])), dyn(oldObject.?a.orValue([])))`,
	`url('https://' + object.?h.orValue('x')).getHost()`,
	`url('https://' + object.?h.orValue('x')).getHostname() + url('https://' + object.?h.orValue('x')).getPort()`,
	`url('https://' + object.?h.orValue('x')).getEscapedPath() + url('https://x').getScheme()`,
	`url('https://' + object.?h.orValue('x')).getQuery()`,
	`isURL(object.?h.orValue('x'))`,
	`quantity(object.?q.orValue('1')).add(quantity('1')).isGreaterThan(quantity('0'))`,
	`isQuantity(object.?s.orValue(''))`,
	`ip('10.0.0.1').family() + cidr('10.0.0.0/8').prefixLength()`,
	`string(cidr('10.0.0.0/8').masked()) + string(ip('::1'))`,
	`isIP(object.?s.orValue('')) || isCIDR(object.?s.orValue(''))`,
	`semver('1.2.3').major()`,
	`format.dns1123Label().validate(object.?metadata.?name.orValue('x')).hasValue()`,
	`format.named('dns1123Subdomain').hasValue()`,
	`has(object.metadata) && has(object.metadata.name)`,
	`request.userInfo.groups + [request.userInfo.username]`,
	`request.kind.kind + request.resource.resource + request.operation`,
	`namespaceObject`,
	`namespaceObject.metadata.name + string(namespaceObject.?metadata.?labels.orValue({}))`,
	`params`,
	`params == null ? [] : dyn(params.?a.orValue([])).map(x, params)`,
	`type(object) == map && size(object) >= 0`,
	`object.?a.orValue([]).size() > 2 ? object.?a.orValue([]) : []`,
	`dyn(object.?a.orValue([])).map(x, dyn(object.?a.orValue([])).map(y, 1))`,
	`timestamp('2024-01-01T00:00:00Z') + duration('1h') > timestamp('2023-01-01T00:00:00Z')`,
	`object.?s.orValue('').replace('a', 'b')`,
	`dyn(object.?a.orValue([])).filter(x, type(x) == string).map(x, string(x)).join(',')`,
	`'%s'.format([object.?s.orValue('')])`,
	`lists.range(3)`,
}

// boundPair is every policy's condition sets compiled twice: with exact
// cost and with bounds.
type boundPair struct {
	names                  []string
	exact, bounded, linear []conditionSets
}

func newBoundPair(tb testing.TB, policies []*admissionregistrationv1.ValidatingAdmissionPolicy) *boundPair {
	tb.Helper()
	exact, bounded, linear := celeval.NewCompiler(celeval.ExactCost()), celeval.NewCompiler(), celeval.NewCompiler(celeval.LinearCost())
	c := &boundPair{}
	for _, p := range policies {
		// Policies that do not compile are compared too: their sets
		// evaluate what compiled.
		vars := len(p.Spec.Variables) > 0
		e, _ := compileSets(exact.ForPolicy(vars), p)
		b, _ := compileSets(bounded.ForPolicy(vars), p)
		l, _ := compileSets(linear.ForPolicy(vars), p)
		c.names = append(c.names, p.Name)
		c.exact, c.bounded, c.linear = append(c.exact, e), append(c.bounded, b), append(c.linear, l)
	}
	return c
}

// compare runs every policy on req both ways, on the default budget and
// one less than the exact cost, and returns how many validation sets went
// untracked at the default budget. thorough adds the budget of the exact
// cost, and an evaluation without params or namespace.
func (c *boundPair) compare(t *testing.T, req *review.Request, thorough bool) int {
	t.Helper()
	params := &unstructured.Unstructured{Object: req.Object.Object}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"team": "a"}}}
	inputs := []evaluationInput{{req: req, namespace: ns, params: params}}
	if thorough {
		inputs = append(inputs, evaluationInput{req: req})
	}
	untracked := 0
	for i := range c.names {
		for _, in := range inputs {
			full := in.run(c.exact[i], celconfig.RuntimeCELCostBudget, nil)
			budgets := []int64{celconfig.RuntimeCELCostBudget}
			if spent := full.spent(); spent > 0 {
				budgets = append(budgets, spent-1)
				if thorough {
					budgets = append(budgets, spent)
				}
			}
			for j, budget := range budgets {
				w := in.run(c.exact[i], budget, nil)
				// A set's first evaluation is tracked: the first budget
				// runs twice, unless the sets have run before.
				runs := 1
				if thorough && j == 0 {
					runs = 2
				}
				for range runs {
					g := in.run(c.bounded[i], budget, nil)
					if !g.agrees(w, false) {
						t.Errorf("%s, budget %d: left %v, exact %v\n%s\nexact:\n%s", c.names[i], budget, g.left, w.left, strings.Join(g.trace, "\n"), strings.Join(w.trace, "\n"))
					}
					if budget == celconfig.RuntimeCELCostBudget && g.left[0] < w.left[0] {
						untracked++
					}
				}
				// The linear tracker counts what cel-go's does, step by
				// step: the same budgets left, to the unit.
				if l := in.run(c.linear[i], budget, nil); !l.agrees(w, true) {
					t.Errorf("%s, budget %d, tracked linearly: left %v, exact %v\n%s\nexact:\n%s", c.names[i], budget, l.left, w.left, strings.Join(l.trace, "\n"), strings.Join(w.trace, "\n"))
				}
			}
		}
	}
	return untracked
}

func withObject(t *testing.T, req *review.Request, obj string) *review.Request {
	t.Helper()
	r, ok := tryWithObject(req, obj)
	if !ok {
		t.Fatalf("not an object: %.80s", obj)
	}
	return r
}

// tryWithObject is req with obj as its object and old object.
func tryWithObject(req *review.Request, obj string) (*review.Request, bool) {
	var m map[string]any
	if utiljson.Unmarshal([]byte(obj), &m) != nil || m == nil {
		return nil, false
	}
	r := *req
	r.Object = &unstructured.Unstructured{Object: m}
	r.OldObject = &unstructured.Unstructured{Object: deepCopy(m)}
	return &r, true
}

func deepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
