package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// One model of the cluster: the Deployment cmd/admitfn's tests decide with
// apply -f (the Namespace in its input) and with test (a cluster: section)
// is decided alike by the function reading the cluster: allowed in the
// tier=system namespace infra, denied in apps with the same message.
func TestOneModelOfTheClusterEndToEnd(t *testing.T) {
	const model = "../../cmd/admitfn/testdata/clustermodel/"
	a := kube.config
	namespace(t, "infra", map[string]string{"tier": "system"})
	namespace(t, "apps", nil)
	clusters := filepath.Join(t.TempDir(), "clusters.yaml")
	writeFileAt(t, clusters, fmt.Sprintf("clusters:\n- {name: a, server: %q, certificateAuthority: %q, tokenFile: %q}\n",
		a.Host, filepath.Join(kube.dir, "kube-apiserver-certs", "apiserver.crt"), readerToken(t, a, true)))
	policy, err := os.ReadFile(model + "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deployment, err := os.ReadFile(model + "deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const want = "ValidatingAdmissionPolicy 'replicas-outside-system' with binding 'replicas-outside-system' denied request: at most 3 replicas outside system namespaces; apps is not one"

	// The CLI: apply -f with the Namespace, and test with cluster:.
	if out, err := exec.Command(kube.cliBin, "apply", "-p", model+"policy.yaml", "-f", model+"deployment.yaml", "-f", model+"namespace.yaml").CombinedOutput(); err != nil {
		t.Fatalf("apply -f: %v\n%s", err, out)
	}
	inApps := filepath.Join(t.TempDir(), "apps.yaml")
	writeFileAt(t, inApps, strings.Replace(string(deployment), "namespace: infra", "namespace: apps", 1))
	out, _ := exec.Command(kube.cliBin, "apply", "-p", model+"policy.yaml", "-f", inApps, "--namespace-labels", "apps=team=web").CombinedOutput()
	if !strings.Contains(string(out), strings.TrimPrefix(want, "ValidatingAdmissionPolicy 'replicas-outside-system' with binding 'replicas-outside-system' denied request: ")) {
		t.Errorf("apply -f in apps: %s", out)
	}
	if out, err := exec.Command(kube.cliBin, "test", model+"tests/cluster_test.yaml").CombinedOutput(); err != nil {
		t.Fatalf("test: %v\n%s", err, out)
	}

	// The function, reading cluster a.
	_, _, uninstall := startAdmitfnOn(t, a, viaServer, map[string]string{"policy.yaml": string(policy)}, "cluster-model", nil, []string{"--clusters", clusters}, "--cluster", "a")
	defer uninstall()
	r := newParityRunnerOn(t, a)
	dry := parityCase{requests: []parityRequest{{verb: "dryrun", object: string(deployment)}}}
	got := append(r.play(dry, "infra", true), r.play(dry, "apps", true)...)
	if !got[0].Allowed {
		t.Errorf("the function denied the Deployment in infra: %s", dumpJSON(got[0]))
	}
	if got[1].Allowed || got[1].Code != 422 || got[1].Message != want {
		t.Errorf("the function in apps: %s, want 422 %q", dumpJSON(got[1]), want)
	}
}
