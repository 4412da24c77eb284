package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// dumpObjects is the size of the dump A1 reviews: a large cluster's
// kubectl get -A -o yaml.
const dumpObjects = 50_000

// writeDump writes a v1 List of n objects as kubectl get -A -o yaml
// prints it: Deployments, Pods and ConfigMaps across 50 namespaces, and
// the Namespaces themselves, some labelled test, some production.
func writeDump(tb testing.TB, n int) string {
	tb.Helper()
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
	path := filepath.Join(tb.TempDir(), "dump.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkA1Apply: admitfn apply on a 50,000-object dump (read, decoded,
// reviewed on every CPU, reported), per resource, against the same reviews
// made one after another on one goroutine from decoded objects: the
// engine's own rate. make bench reports A1 = engine time ÷ apply time per
// resource, the throughput ratio.
func BenchmarkA1Apply(b *testing.B) {
	dump := writeDump(b, dumpObjects)
	b.Run("apply", func(b *testing.B) {
		for b.Loop() {
			c := &cli{in: bytes.NewReader(nil), out: io.Discard, err: io.Discard, getenv: func(string) string { return "" }, now: time.Now}
			if code := c.run([]string{"apply", "-p", "../../policies/examples", "-f", dump, "--audit"}); code != 0 {
				b.Fatalf("apply: exit %d", code)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dumpObjects), "ns/resource")
	})
	b.Run("engine", func(b *testing.B) {
		c := &cli{getenv: func(string) string { return "" }}
		eng, set, _, err := c.loadBundle("../../policies/examples")
		if err != nil {
			b.Fatal(err)
		}
		declared := map[string]map[string]string{}
		items, err := c.readAllManifests([]string{dump}, declared)
		if err != nil {
			b.Fatal(err)
		}
		o := applyOptions{namespace: "default", user: "admitfn-apply", groups: []string{"system:authenticated"}}
		b.ResetTimer()
		for b.Loop() {
			for _, m := range items {
				reviewManifest(context.Background(), eng, set, m, nil, declared, o)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/resource")
	})
}
