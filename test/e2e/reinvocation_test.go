package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reinvocation does not depend on the order of the bundle's files: the
// upstream counters (two IfNeeded policies, one Never) give 5 whatever
// order render puts their webhooks in, as in-cluster they give 5 whatever
// order kube-apiserver takes them in.
func TestReinvocationInAnyFileOrder(t *testing.T) {
	docs := counterPolicies()
	ns := "reinvocation-order"
	namespace(t, ns, nil)
	cs, _ := kube.client(t)
	ctx := context.Background()
	orders := map[string]bool{}
	for i, perm := range permutations(len(docs)) {
		files := map[string]string{}
		for pos, d := range perm {
			files[fmt.Sprintf("%d.yaml", pos)] = docs[d]
		}
		name := fmt.Sprintf("reinvoke-%d", i)
		_, _, uninstall := startAdmitfn(t, files, name, nil)
		cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The order of the webhooks: the Never group's (whose name
		// follows the sentinel's) and each IfNeeded binding's own.
		var order []string
		for _, w := range cfg.Webhooks {
			if *w.ReinvocationPolicy == admissionregistrationv1.NeverReinvocationPolicy {
				order = append(order, "never")
				continue
			}
			order = append(order, w.Name)
		}
		orders[strings.Join(order, " ")] = true
		if n := slices.Index(order, "never"); n < 0 || len(order) != 3 {
			t.Fatalf("permutation %v: webhooks %v, want the Never group and one per IfNeeded binding", perm, order)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("count-%d", i)}}
		got, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("permutation %v: %v", perm, err)
		}
		if c := got.Annotations["count"]; c != "5" {
			t.Errorf("permutation %v (webhooks %v): count %q, want 5", perm, order, c)
		}
		uninstall()
	}
	if len(orders) != 6 {
		t.Errorf("%d distinct webhook orders over 6 permutations, want 6: %v", len(orders), orders)
	}
}

// permutations of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}
