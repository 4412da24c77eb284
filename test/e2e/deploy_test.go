package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deploy/kubernetes is what kube-apiserver accepts as it is: its namespace
// created, every other object (the ingress too) passes a server-side dry
// run there with no warning — among them Pod Security's, which the
// namespace enforces at restricted — and a pod template that breaks the
// standard is warned about, so the check can fail. functions/server's
// TestKubernetesManifests runs the server as the Deployment says.
func TestKubernetesManifests(t *testing.T) {
	r := newParityRunner(t)
	files, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	more, _ := filepath.Glob("../../deploy/kubernetes/*/*.yaml")
	var objects []*unstructured.Unstructured
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, r.decode(string(data), "")...)
	}
	kinds := []string{}
	for _, u := range objects {
		kinds = append(kinds, u.GetKind())
	}
	if want := []string{"Namespace", "Deployment", "PodDisruptionBudget", "Service", "Ingress"}; !slices.Equal(kinds, want) {
		t.Fatalf("deploy/kubernetes holds %v, want %v in file order", kinds, want)
	}
	ctx := context.Background()
	ns := objects[0]
	res, _ := r.resource(ns)
	if _, err := res.Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Delete(context.Background(), ns.GetName(), metav1.DeleteOptions{}) })
	r.warn.take()
	dryRun := func(u *unstructured.Unstructured) []string {
		t.Helper()
		res, _ := r.resource(u)
		if _, err := res.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		return r.warn.take()
	}
	for _, u := range objects[1:] {
		if u.GetNamespace() != ns.GetName() {
			t.Errorf("%s %s is in namespace %q, want %q", u.GetKind(), u.GetName(), u.GetNamespace(), ns.GetName())
		}
		if w := dryRun(u); len(w) > 0 {
			t.Errorf("%s %s: warnings %q", u.GetKind(), u.GetName(), w)
		}
	}
	// The same Deployment letting its container escalate privileges.
	broken := objects[1].DeepCopy()
	containers, _, _ := unstructured.NestedSlice(broken.Object, "spec", "template", "spec", "containers")
	unstructured.RemoveNestedField(containers[0].(map[string]any), "securityContext", "allowPrivilegeEscalation")
	unstructured.SetNestedSlice(broken.Object, containers, "spec", "template", "spec", "containers")
	if w := dryRun(broken); len(w) != 1 || !strings.Contains(w[0], `would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false`) {
		t.Errorf("a template that breaks restricted: warnings %q", w)
	}
}
