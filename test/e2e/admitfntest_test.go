package e2e

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAdmitfnTestAgreesWithKubeAPIServer plays the cases of the example
// bundle's test file against kube-apiserver with the bundle's webhooks
// installed: what `admitfn test` expects is what the apiserver does.
func TestAdmitfnTestAgreesWithKubeAPIServer(t *testing.T) {
	const examples = "../../policies/examples"
	raw, err := os.ReadFile(filepath.Join(examples, "examples_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Namespaces map[string]map[string]string
		Cases      []struct {
			Name, Operation, Namespace string
			Object                     map[string]any
			Expect                     struct {
				Allowed  bool
				Message  string
				Code     int32
				Warnings []string
				Object   map[string]any
			}
		}
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	entries, err := os.ReadDir(examples)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") && !strings.HasSuffix(e.Name(), "_test.yaml") {
			b, err := os.ReadFile(filepath.Join(examples, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(b)
		}
	}
	deployAdmitfn(t, files)
	cs, _ := kube.client(t)
	for name, labels := range tf.Namespaces {
		namespace(t, name, labels)
		// Pods need the namespace's default ServiceAccount; no controller
		// makes it here.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		if _, err := cs.CoreV1().ServiceAccounts(name).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	r := newParityRunner(t)
	played := 0
	for _, c := range tf.Cases {
		if c.Operation != "" && c.Operation != "CREATE" {
			continue // the cluster has no object to update or delete
		}
		t.Run(c.Name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: c.Object}
			u.SetNamespace(c.Namespace)
			ri, _ := r.resource(u)
			got, err := ri.Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			o, _ := stripWebhook(t, result(err, r.warn))
			want := outcome{allowed: c.Expect.Allowed, message: c.Expect.Message, code: c.Expect.Code, warnings: c.Expect.Warnings}
			if !want.allowed && want.code == 0 {
				want.code = o.code // the case does not say
			}
			expect(t, c.Name, o, want)
			if c.Expect.Object != nil && err == nil {
				if diffs := containedIn(c.Expect.Object, got.Object); len(diffs) > 0 {
					t.Errorf("the created object differs from the expected one: %v", diffs)
				}
			}
		})
		played++
	}
	if played < 4 {
		t.Fatalf("only %d cases played", played)
	}
}

// containedIn lists the paths of want that got does not hold.
func containedIn(want, got map[string]any) []string {
	var diffs []string
	for k, wv := range want {
		gv, ok := got[k]
		switch w := wv.(type) {
		case map[string]any:
			g, isMap := gv.(map[string]any)
			if !ok || !isMap {
				diffs = append(diffs, k)
				continue
			}
			for _, d := range containedIn(w, g) {
				diffs = append(diffs, k+"."+d)
			}
		case []any:
			g, isList := gv.([]any)
			if !ok || !isList || len(g) != len(w) {
				diffs = append(diffs, k)
				continue
			}
			for i := range w {
				wm, wok := w[i].(map[string]any)
				gm, gok := g[i].(map[string]any)
				if wok && gok {
					for _, d := range containedIn(wm, gm) {
						diffs = append(diffs, k+"."+d)
					}
				} else if !reflect.DeepEqual(w[i], g[i]) {
					diffs = append(diffs, k)
				}
			}
		default:
			if !ok || !reflect.DeepEqual(normaliseNumber(wv), normaliseNumber(gv)) {
				diffs = append(diffs, k)
			}
		}
	}
	return diffs
}

func normaliseNumber(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return v
}
