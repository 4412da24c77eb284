package e2e

import (
	"context"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMutations runs the example mutations with a validation behind them,
// on every front: the answer's patch is applied by kube-apiserver, and the
// validating webhook sees the mutated object.
func TestMutations(t *testing.T) { eachFront(t, mutations) }

func mutations(t *testing.T, via front) {
	files := map[string]string{"p.yaml": replicasPolicy + binding("deny", "replicas.e2e.admitfn.io", "[Deny]", "")}
	for _, example := range []string{"08-mutate-label.yaml", "10-mutate-pull-policy.yaml"} {
		b, err := os.ReadFile("../../policies/examples/" + example)
		if err != nil {
			t.Fatal(err)
		}
		files[example] = string(b)
	}
	a, _ := deployAdmitfnVia(t, via, files)
	ns := "e2e-mutate-" + string(via)
	namespace(t, ns, nil)
	cs, w := kube.client(t)
	ctx := context.Background()

	// Mutated, then validated and admitted.
	got, err := cs.AppsV1().Deployments(ns).Create(ctx, deploymentObj("web", 2, map[string]string{"team": "a"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"team": "a", "admitfn.io/managed": "true"}; !reflect.DeepEqual(got.Labels, want) {
		t.Errorf("deployment labels %v, want %v", got.Labels, want)
	}
	// Mutated, then denied by the validation.
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, deploymentObj("big", 5, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	denied, _ := stripWebhook(t, result(err, w))
	expect(t, "mutated and denied", denied, outcome{code: 403, message: "ValidatingAdmissionPolicy 'replicas.e2e.admitfn.io' with binding 'deny' denied request: replicas must be at most 3, got 5"})

	// A real create: what is stored carries the patch. (No controller makes
	// the namespace's default ServiceAccount, which pods need.)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: "registry.example.com/app:1.0"},
		{Name: "proxy", Image: "registry.example.com/proxy:2.1", ImagePullPolicy: corev1.PullNever},
	}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.CoreV1().Pods(ns).Delete(context.Background(), "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	stored, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range stored.Spec.Containers {
		if c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("stored container %s has imagePullPolicy %s, want Always", c.Name, c.ImagePullPolicy)
		}
	}
	if !a.reviewed(via, "denied") || !a.reviewed(via, "allowed") {
		t.Errorf("no review lines from the %s front:\n%s", via, a.Logs())
	}
	if warnings := w.take(); len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
}
