package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// readManifest decodes deploy/kubernetes/name strictly into out.
func readManifest(t *testing.T, name string, out any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../deploy/kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// deploy/kubernetes runs the server as its Deployment says: with the
// container's arguments and environment (its secrets and volumes given as
// a cluster would, its listen address moved to loopback), the probes'
// paths answer on the port they name over the scheme they name, and a
// review on the token route is answered; the Service and the disruption
// budget select the pods and the port the Deployment has.
// test/e2e's TestKubernetesManifests has kube-apiserver check them.
func TestKubernetesManifests(t *testing.T) {
	var d appsv1.Deployment
	var svc corev1.Service
	var pdb policyv1.PodDisruptionBudget
	readManifest(t, "deployment.yaml", &d)
	readManifest(t, "service.yaml", &svc)
	readManifest(t, "poddisruptionbudget.yaml", &pdb)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	labels := d.Spec.Template.Labels
	if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, labels) || !reflect.DeepEqual(svc.Spec.Selector, labels) || !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("selectors: deployment %v, service %v, budget %v; want the template's %v", d.Spec.Selector.MatchLabels, svc.Spec.Selector, pdb.Spec.Selector.MatchLabels, labels)
	}
	if len(c.Ports) != 1 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != c.Ports[0].Name {
		t.Fatalf("the Service targets %v, the container has %v", svc.Spec.Ports, c.Ports)
	}
	// The image's user (hack/release), which runAsNonRoot needs numeric.
	if sc := pod.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsUser 65532, the image's", pod.SecurityContext)
	}

	// The secrets, as the cluster would mount and inject them.
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = filepath.Join(dir, m.Name)
		os.MkdirAll(mounts[m.MountPath], 0o755)
	}
	os.WriteFile(filepath.Join(mounts["/tls"], "tls.crt"), certPEM, 0o600)
	os.WriteFile(filepath.Join(mounts["/tls"], "tls.key"), keyPEM, 0o600)
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "admitfn-tokens":
			env[e.Name] = testToken
		case e.ValueFrom != nil:
			t.Fatalf("env %s comes from %+v, which the test does not provide", e.Name, e.ValueFrom)
		case e.Value == "/policies":
			env[e.Name] = examples // the image's /policies
		default:
			env[e.Name] = e.Value
		}
	}
	var args []string
	port := ""
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		if a == "--addr" && i+1 < len(c.Args) {
			port = strings.TrimPrefix(c.Args[i+1], ":")
			args = append(args, a, "127.0.0.1:0")
			i++
			continue
		}
		for mount, local := range mounts {
			if rest, ok := strings.CutPrefix(a, mount+"/"); ok {
				a = filepath.Join(local, rest)
			}
		}
		args = append(args, a)
	}
	if port != "8443" || c.Ports[0].ContainerPort != 8443 {
		t.Fatalf("--addr port %q, containerPort %d: want the same", port, c.Ports[0].ContainerPort)
	}
	addr, logs := start(t, args, env)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		g := probe.HTTPGet
		if g == nil || g.Port.StrVal != c.Ports[0].Name || g.Scheme != corev1.URISchemeHTTPS {
			t.Fatalf("probe %+v: want an HTTPS GET on port %q", probe, c.Ports[0].Name)
		}
		resp, err := client.Get("https://" + addr + g.Path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("probe %s: HTTP %d\n%s", g.Path, resp.StatusCode, logs)
		}
	}
	if code, err := post(t, client, "https://"+addr+"/"+testToken+"/validate", review(t)); err != nil || code != http.StatusOK {
		t.Errorf("a review on the token route: %d, %v", code, err)
	}
	if code, err := post(t, client, "https://"+addr+"/validate", review(t)); err != nil || code != http.StatusNotFound {
		t.Errorf("a review without the token: %d, %v; want 404", code, err)
	}
}

// Finding: the ingress example logged request paths, whose first segment
// is the path token. ingress-nginx's access log is off for it.
func TestIngressLogsNoPath(t *testing.T) {
	var ing networkingv1.Ingress
	readManifest(t, "ingress/ingress.yaml", &ing)
	if got := ing.Annotations["nginx.ingress.kubernetes.io/enable-access-log"]; got != "false" {
		t.Errorf("ingress annotations %v: want enable-access-log \"false\"", ing.Annotations)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("ingress class %v: the annotation is ingress-nginx's", ing.Spec.IngressClassName)
	}
}
