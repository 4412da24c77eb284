// Package perf holds the fixtures of admitfn's performance measures (make
// bench, docs/performance.md): an ~8 KB Pod AdmissionReview, the 20-policy
// bundle it is reviewed against (the policy library's Pod Security Standards
// and other policies, plus guardrails), and generated bundles of any size in
// which a chosen number of policies match that Pod.
package perf

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing/fstest"

	"github.com/admitfn/admitfn/core/policy"
)

//go:embed testdata/pod-review.json testdata/guardrails.yaml testdata/pod-security-bindings.yaml
var testdata embed.FS

// PodReview is an admission.k8s.io/v1 AdmissionReview of a Pod CREATE in
// namespace "shop", compact as kube-apiserver sends it (about 8 KB). Every
// policy of Bundle20 allows it; two raise warnings or audit annotations.
func PodReview() []byte {
	data, err := testdata.ReadFile("testdata/pod-review.json")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var out bytes.Buffer
	if err := json.Compact(&out, data); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// libraryBundles are the validating policies of policies/library in
// Bundle20: eight policies, five of which match Pods.
var libraryBundles = []string{
	"pod-security", "disallow-latest-tag", "allowed-registries", "resources-required",
	"no-external-ips", "replica-limits", "required-labels",
}

// Bundle20 is the 20-policy bundle of the P1 and P2 measures: the validating
// policies of the policy library under root (the repository) and twelve Pod
// guardrails. 17 of its policies match the Pod of PodReview.
func Bundle20(root string) (fstest.MapFS, error) {
	fsys := fstest.MapFS{}
	for _, b := range libraryBundles {
		dir := filepath.Join(root, "policies", "library", b)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !policy.IsBundleFile(e.Name()) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			fsys[path.Join("library", b, e.Name())] = &fstest.MapFile{Data: data}
		}
	}
	// The library binds its Pod Security profiles by namespace label, which
	// puts them on webhooks of their own; here they are bound everywhere so
	// that one review meets all twenty policies.
	bindings, err := testdata.ReadFile("testdata/pod-security-bindings.yaml")
	if err != nil {
		return nil, err
	}
	fsys["library/pod-security/bindings.yaml"] = &fstest.MapFile{Data: bindings}
	guardrails, err := testdata.ReadFile("testdata/guardrails.yaml")
	if err != nil {
		return nil, err
	}
	fsys["guardrails.yaml"] = &fstest.MapFile{Data: guardrails}
	return fsys, nil
}

// RepoRoot is the repository the caller runs in (tests run in their
// package's directory): the nearest directory above the working directory
// holding policies/library, else the one this package was built from.
func RepoRoot() string {
	if dir, err := os.Getwd(); err == nil {
		for {
			if fi, err := os.Stat(filepath.Join(dir, "policies", "library")); err == nil && fi.IsDir() {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Generated is a bundle of n validating policies, each with one binding, in
// one file named generated.yaml. The first `matching` match Pod CREATEs and
// allow the Pod of PodReview; the others never match it: they are spread over
// other resources of core, apps, batch and custom groups, and over Pod
// operations and subresources other than a CREATE of the Pod itself, as a
// large cluster-wide bundle would be.
func Generated(n, matching int) fstest.MapFS {
	var b strings.Builder
	for i := range n {
		rules := otherRules(i)
		validations := `
  - expression: "object.metadata.name.size() <= 253"
    message: "names are at most 253 characters"
  - expression: "!has(object.metadata.labels) || object.metadata.labels.all(k, k.size() <= 317)"
    message: "label keys are at most 317 characters"`
		if i < matching {
			rules = `{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}`
			validations = fmt.Sprintf(`
  - expression: "size(object.spec.containers) <= %d"
    messageExpression: "'at most %d containers, found ' + string(size(object.spec.containers))"
  - expression: "object.spec.containers.all(c, c.image.size() <= 512)"
    message: "image references are at most 512 characters"`, 8+i, 8+i)
		}
		fmt.Fprintf(&b, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: generated-%04d.bench.admitfn.io}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - %s
  validations:%s
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: generated-%04d}
spec:
  policyName: generated-%04d.bench.admitfn.io
  validationActions: [Deny]
---
`, i, rules, validations, i, i)
	}
	return fstest.MapFS{"generated.yaml": &fstest.MapFile{Data: []byte(b.String())}}
}

// otherRules is a resource rule that does not match a Pod CREATE.
func otherRules(i int) string {
	switch i % 6 {
	case 0:
		return fmt.Sprintf(`{apiGroups: [g%d.bench.admitfn.io], apiVersions: ["*"], operations: ["*"], resources: ["*"]}`, i)
	case 1:
		return `{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments, statefulsets, daemonsets]}`
	case 2:
		return `{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE, DELETE], resources: [services, configmaps, secrets]}`
	case 3:
		return `{apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [pods]}`
	case 4:
		return `{apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec, pods/attach, pods/portforward]}`
	default:
		return `{apiGroups: [batch], apiVersions: ["*"], operations: ["*"], resources: [jobs, cronjobs, "*/status"]}`
	}
}

// Merge combines bundles; later files replace earlier ones of the same name.
func Merge(bundles ...fstest.MapFS) fstest.MapFS {
	out := fstest.MapFS{}
	for _, b := range bundles {
		for name, f := range b {
			out[name] = f
		}
	}
	return out
}

// WriteDir writes fsys under dir, as a bundle directory the functions load.
func WriteDir(fsys fs.FS, dir string) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// ClusterDump is a v1 List of n objects as kubectl get -A -o yaml prints
// it, a large cluster's for A1 and bench-peers' W2: Deployments, Pods and
// ConfigMaps across 50 namespaces, and the Namespaces themselves, some
// labelled test, some production.
func ClusterDump(n int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for ns := range 50 {
		env := []string{"test", "production"}[ns%2]
		fmt.Fprintf(&b, "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: ns-%d\n    labels: {environment: %s}\n", ns, env)
	}
	for i := range n - 50 {
		ns := i % 50
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, `- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: app-%d, namespace: ns-%d, uid: 00000000-0000-4000-8000-%012d, labels: {app: app-%d}}
  spec:
    replicas: %d
    selector: {matchLabels: {app: app-%d}}
    template:
      metadata: {labels: {app: app-%d}}
      spec:
        containers:
        - {name: app, image: "registry.example.com/app:%d", resources: {limits: {cpu: 500m, memory: 256Mi}}}
`, i, ns, i, i, 1+i%12, i, i, i%7)
		case 1:
			fmt.Fprintf(&b, `- apiVersion: v1
  kind: Pod
  metadata: {name: pod-%d, namespace: ns-%d, uid: 00000000-0000-4000-8000-%012d, labels: {app: pod-%d}}
  spec:
    containers:
    - {name: main, image: "registry.example.com/pod:%d"}
    - {name: log, image: "busybox:latest"}
`, i, ns, i, i, i%5)
		default:
			fmt.Fprintf(&b, "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm-%d, namespace: ns-%d}\n  data: {key: value-%d}\n", i, ns, i)
		}
	}
	return b.Bytes()
}
