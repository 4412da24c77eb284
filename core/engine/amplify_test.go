package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// bombConfigMap is the 248 KB ConfigMap of the report: a template of 32,000
// ${V} and a 120 KB value to put in each.
func bombConfigMap() map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "bomb", "namespace": "default",
		"annotations": map[string]any{"tmpl": strings.Repeat("${V}", 32000), "val": strings.Repeat("x", 120000)}}}
}

// Functions that build values far larger than their arguments fail before
// they allocate (kube-apiserver asks for 3.8 GB here and dies), with an
// evaluation error the failurePolicy answers exactly like a cost-limit error.
func TestAmplifyingFunctionsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		expr, err string
	}{
		{"object.metadata.annotations['tmpl'].replace('${V}', object.metadata.annotations['val']).size() > 0",
			"operation cancelled: replace would build a value of 3840000000 bytes, more than the 7340032 a function may build"},
		{"object.metadata.annotations['tmpl'].replace('${V}', object.metadata.annotations['val'], 1000).size() > 0",
			"operation cancelled: replace would build a value of 120124000 bytes, more than the 7340032 a function may build"},
		{"object.metadata.annotations['tmpl'].split('$').join(object.metadata.annotations['val']).size() > 0",
			"operation cancelled: join would build a value of 3840096000 bytes, more than the 7340032 a function may build"},
		{"('%s'.format([object.metadata.annotations['val']]) + '').size() > 0 && '%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s'.format([" + strings.TrimSuffix(strings.Repeat("object.metadata.annotations['val'],", 64), ",") + "]).size() > 0",
			"operation cancelled: format would build a value of 7680256 bytes, more than the 7340032 a function may build"},
		{"lists.range(100000000).size() > 0",
			"operation cancelled: lists.range would build a value of 100000000 elements, more than the 1000000 a function may build"},
	} {
		t.Run(tc.err[:strings.Index(tc.err, " would")], func(t *testing.T) {
			for _, fp := range []string{"Fail", "Ignore"} {
				e := mustEngine(t, configMapPolicies(1, fp, tc.expr))
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				res, err := e.Review(context.Background(), groupOf(t, e, "runaway-0"), configMapRequest(t, "CREATE", bombConfigMap()))
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				want := want{allowed: true}
				if fp == "Fail" {
					want = denied(422, "Invalid", "ValidatingAdmissionPolicy 'runaway-0' with binding 'runaway-0' denied request: expression '"+tc.expr+"' resulted in error: "+tc.err)
				}
				check(t, res, want)
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
					t.Errorf("%s: the review allocated %d MiB", fp, alloc>>20)
				}
			}
		})
	}
}

// What a call builds beyond its arguments costs 1 a byte, so many calls
// within the size bound still run out of budget instead of memory: 200
// strings of 1 MB each kept in a list.
func TestAmplificationIsCharged(t *testing.T) {
	expr := "lists.range(200).map(i, 'x'.replace('x', object.metadata.annotations['val'])).size() > 0"
	cm := bombConfigMap()
	cm["metadata"].(map[string]any)["annotations"].(map[string]any)["val"] = strings.Repeat("y", 1000000)
	e := mustEngine(t, configMapPolicies(1, "Fail", expr))
	res, err := e.Review(context.Background(), groupOf(t, e, "runaway-0"), configMapRequest(t, "CREATE", cm))
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, denied(422, "Invalid", "ValidatingAdmissionPolicy 'runaway-0' with binding 'runaway-0' denied request: expression '"+expr+"' resulted in error: operation cancelled: actual cost limit exceeded"))

	// Calls that build no more than they are given cost what they cost
	// upstream: a replace that shrinks, a join without a separator.
	for _, ok := range []string{
		"object.metadata.annotations['val'].replace('y', '').size() == 0",
		"lists.range(10).map(i, string(i)).join() == '0123456789'",
		"'%s-%s'.format(['a', 'b']) == 'a-b'",
	} {
		e := mustEngine(t, configMapPolicies(1, "Fail", ok))
		res, err := e.Review(context.Background(), groupOf(t, e, "runaway-0"), configMapRequest(t, "CREATE", cm))
		if err != nil {
			t.Fatal(err)
		}
		check(t, res, want{allowed: true})
	}
}

// peakHeap runs f while sampling the heap, with the collector kept close to
// what is live, and returns the most the heap grew above where it began.
func peakHeap(f func()) uint64 {
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak - min(base, peak)
}

// Whatever a policy composes from the amplifying functions, over objects of
// any size, a review's heap stays under a fixed multiple of the request
// (plus the engine's own working room).
func TestPeakHeapPerReviewIsBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1))
	templates := []string{
		"object.data['a'].replace(object.data['b'], object.data['c']).size() > 0",
		"object.data['a'].replace(object.data['b'], object.data['c'], %d).size() > 0",
		"object.data['a'].split(object.data['b']).join(object.data['c']).size() > 0",
		"lists.range(%d).map(i, object.data['c']).join(object.data['a']).size() > 0",
		"lists.range(%d).map(i, 'x'.replace('x', object.data['c'])).size() > 0",
		"lists.range(%d).map(i, '%%s%%s%%s%%s'.format([object.data['c'], object.data['a'], object.data['c'], object.data['c']])).size() > 0",
		"(" + strings.TrimSuffix(strings.Repeat("object.data['c'] + ", 32), " + ") + ").size() > 0",
		"lists.range(%d).map(i, lists.range(%d)).size() > 0",
	}
	const cases = 40
	for i := range cases {
		tmpl := templates[i%len(templates)]
		n := rng.IntN(5000) + 1
		expr := tmpl
		if strings.Count(tmpl, "%d") == 1 {
			expr = fmt.Sprintf(tmpl, n)
		} else if strings.Count(tmpl, "%d") == 2 {
			expr = fmt.Sprintf(tmpl, n, rng.IntN(5000)+1)
		}
		data := map[string]any{
			"a": strings.Repeat("ab", rng.IntN(50000)+1),
			"b": []string{"a", "b", "ab", ""}[rng.IntN(4)],
			"c": strings.Repeat("z", rng.IntN(400000)+1),
		}
		cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "p", "namespace": "default"}, "data": data}
		size := uint64(len(data["a"].(string)) + len(data["b"].(string)) + len(data["c"].(string)))
		e := mustEngine(t, configMapPolicies(1, "Fail", expr))
		req := configMapRequest(t, "CREATE", cm)
		var err error
		grew := peakHeap(func() { _, err = e.Review(context.Background(), groupOf(t, e, "runaway-0"), req) })
		if err != nil {
			t.Fatal(err)
		}
		if limit := 16*size + 96<<20; grew > limit {
			t.Errorf("%s over %d bytes of data: the heap grew by %d MiB, more than %d MiB", expr, size, grew>>20, limit>>20)
		}
	}
}
