//go:build benchpeers

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestW3PodCreateLatency is make bench-peers' W3 (docs/performance.md,
// "Against the alternatives"), not part of make test (build tag
// benchpeers): the latency of a Pod create through this suite's
// kube-apiserver, at 1, 8 and 32 concurrent writers, with no policy, with
// the policy library's Pod Security profiles as ValidatingAdmissionPolicies
// in kube-apiserver, and with the same bundle served by admitfn's server
// as a URL webhook over loopback HTTPS, rendered by `admitfn render`. Every
// Pod is one the profiles allow (restricted). It prints one line per
// configuration and writer count, then each configuration's added p50 and
// p99 (its percentile less the one without policy) and the goal's ratio.
func TestW3PodCreateLatency(t *testing.T) {
	const ns = "w3-latency"
	namespace(t, ns, map[string]string{"admitfn.io/pod-security": "restricted"})
	cfg := rest.CopyConfig(kube.config)
	// client-go's default rate limit (5 a second) would be the measure.
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// No controller manager runs to make the namespace's service account,
	// which the ServiceAccount admission plugin looks up for every Pod.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lib := "../../policies/library/pod-security"
	files := map[string]string{}
	for _, f := range []string{"policy-baseline.yaml", "policy-restricted.yaml", "bindings.yaml"} {
		data, err := os.ReadFile(filepath.Join(lib, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(data)
	}

	writers := []int{1, 8, 32}
	results := map[string]map[int][2]time.Duration{}
	measure := func(config string) {
		results[config] = map[int][2]time.Duration{}
		for _, w := range writers {
			p50, p99 := createLatency(t, cs, ns, w)
			results[config][w] = [2]time.Duration{p50, p99}
			fmt.Printf("W3 %s %d writers p50 %.2f ms p99 %.2f ms\n", config, w, ms(p50), ms(p99))
		}
	}

	measure("none")

	undo := installPolicies(t, cs, files)
	waitDenied(t, cs, ns, true)
	measure("in-apiserver")
	undo()
	waitDenied(t, cs, ns, false)

	copied := map[string]string{}
	for k, v := range files {
		copied[k] = v
	}
	_, _, uninstall := startAdmitfn(t, copied, "w3-latency", nil)
	waitDenied(t, cs, ns, true)
	measure("admitfn")
	uninstall()

	for _, config := range []string{"in-apiserver", "admitfn"} {
		for _, w := range writers {
			fmt.Printf("W3 added %s %d writers p50 %.2f ms p99 %.2f ms\n", config, w,
				ms(results[config][w][0]-results["none"][w][0]), ms(results[config][w][1]-results["none"][w][1]))
		}
	}
	ours := results["admitfn"][8][1] - results["none"][8][1]
	theirs := results["in-apiserver"][8][1] - results["none"][8][1]
	verdict := "PASS"
	if float64(ours) > 2*float64(theirs) {
		verdict = "FAIL"
	}
	fmt.Printf("W3 %.3g target <=2 (added p99 at 8 writers: admitfn %.2f ms, in-apiserver %.2f ms) %s\n",
		float64(ours)/float64(max(theirs, time.Microsecond)), ms(ours), ms(theirs), verdict)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// w3Pod is a Pod both profiles allow.
func w3Pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "w3-"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.example.com/app:1.0",
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				RunAsNonRoot:             ptr.To(true),
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}}},
	}
}

// createLatency creates Pods from w writers, 50 to warm then 50 a writer
// (at least 1,000) timed, and returns the p50 and p99 of the timed creates.
// The Pods are deleted after.
func createLatency(t *testing.T, cs *kubernetes.Clientset, ns string, w int) (p50, p99 time.Duration) {
	t.Helper()
	ctx := context.Background()
	create := func() (time.Duration, error) {
		began := time.Now()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, w3Pod(), metav1.CreateOptions{})
		return time.Since(began), err
	}
	for range 50 {
		if _, err := create(); err != nil {
			t.Fatal(err)
		}
	}
	n := max(1000, 50*w)
	took := make([]time.Duration, 0, n)
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	for i := range w {
		count := n / w
		if i < n%w {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range count {
				d, err := create()
				mu.Lock()
				if err != nil && failed == nil {
					failed = err
				}
				took = append(took, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(took)
	return took[len(took)*50/100], took[len(took)*99/100]
}

// installPolicies creates the bundle's ValidatingAdmissionPolicies and
// bindings in kube-apiserver, and returns what deletes them.
func installPolicies(t *testing.T, cs *kubernetes.Clientset, files map[string]string) func() {
	t.Helper()
	ctx := context.Background()
	var policies, bindings []string
	for _, content := range files {
		dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(content), 4096)
		for {
			var obj struct {
				Kind string `json:"kind"`
			}
			var raw map[string]any
			if err := dec.Decode(&raw); err != nil {
				break
			}
			data, err := json.Marshal(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &obj); err != nil {
				t.Fatal(err)
			}
			switch obj.Kind {
			case "ValidatingAdmissionPolicy":
				var p admissionregistrationv1.ValidatingAdmissionPolicy
				if err := json.Unmarshal(data, &p); err != nil {
					t.Fatal(err)
				}
				if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				policies = append(policies, p.Name)
			case "ValidatingAdmissionPolicyBinding":
				var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
				if err := json.Unmarshal(data, &b); err != nil {
					t.Fatal(err)
				}
				if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				bindings = append(bindings, b.Name)
			}
		}
	}
	if len(policies) != 2 || len(bindings) != 2 {
		t.Fatalf("installed policies %v and bindings %v, want two of each", policies, bindings)
	}
	return func() {
		for _, b := range bindings {
			cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, b, metav1.DeleteOptions{})
		}
		for _, p := range policies {
			cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, p, metav1.DeleteOptions{})
		}
	}
}

// waitDenied waits until the dry-run create of a Pod that restricted
// denies (it may escalate privileges) in ns is denied by that profile (the
// policies are in force), or allowed (they are gone).
func waitDenied(t *testing.T, cs *kubernetes.Clientset, ns string, denied bool) {
	t.Helper()
	pod := w3Pod()
	pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	err := waitFor(func() error {
		_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case denied && (err == nil || !strings.Contains(err.Error(), "pod-security-restricted.admitfn.io")):
			return fmt.Errorf("a pod that may escalate privileges: %v, want denied by pod-security-restricted.admitfn.io", err)
		case !denied && err != nil:
			return fmt.Errorf("a pod that may escalate privileges: %v, want allowed", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
