package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestPodSecurityLibraryAgreesWithPodSecurityAdmission plays the Pod cases
// of the library's Pod Security Standards tests against kube-apiserver's own
// Pod Security Admission, enforcing the same profile on a namespace: every
// pod the policies deny, PSA denies for the same control, and every pod
// they allow, PSA allows.
func TestPodSecurityLibraryAgreesWithPodSecurityAdmission(t *testing.T) {
	raw, err := os.ReadFile("../../policies/library/pod-security/pod-security_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Cases []struct {
			Name   string
			Object map[string]any
			Expect struct {
				Allowed bool
				Message string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	cs, _ := kube.client(t)
	namespaces := map[string]string{"base": "e2e-psa-baseline", "strict": "e2e-psa-restricted"}
	for level, ns := range map[string]string{"baseline": namespaces["base"], "restricted": namespaces["strict"]} {
		namespace(t, ns, map[string]string{"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"})
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	played := 0
	for _, c := range tf.Cases {
		if c.Object["kind"] != "Pod" {
			continue // Pod Security Admission only warns about workloads
		}
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, pod); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		ns, ok := namespaces[pod.Namespace]
		if !ok {
			continue // a namespace the policies do not check
		}
		pod.Namespace = ns
		t.Run(c.Name, func(t *testing.T) {
			_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if apierrors.IsInvalid(err) {
				// API validation, which runs before Pod Security Admission,
				// refuses the pod (an unmasked /proc outside a user
				// namespace): only the policies' test can see it.
				t.Skipf("kube-apiserver refuses the pod before admission: %v", err)
			}
			if c.Expect.Allowed {
				if err != nil {
					t.Errorf("the policies allow the pod; Pod Security Admission: %v", err)
				}
				return
			}
			// The control, as both name it: "host namespaces", "privileged", ...
			_, detail, _ := strings.Cut(c.Expect.Message, "denied request: ")
			control, _, _ := strings.Cut(detail, " (")
			if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") || !strings.Contains(err.Error(), control) {
				t.Errorf("the policies deny the pod for %q; Pod Security Admission: %v", control, err)
			}
		})
		played++
	}
	if played < 24 {
		t.Fatalf("only %d pod cases played", played)
	}
}
