package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// compiler is shared: building the CEL base environment is the costly part
// of compiling, and a Compiler is read-only.
var compiler = celeval.NewCompiler()

const examples = "../../policies/examples"

// loadExamples builds an engine from the named files of policies/examples.
func loadExamples(t *testing.T, names ...string) *Engine {
	t.Helper()
	var sources []policy.Source
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(examples, n))
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, policy.Source{Name: n, Data: data})
	}
	return mustEngine(t, sources...)
}

func mustEngine(t *testing.T, sources ...policy.Source) *Engine {
	t.Helper()
	return builtWith(t, New, sources...)
}

// builtWith parses sources and builds their engine with build (New or
// NewDeferred).
func builtWith(t *testing.T, build func(*policy.Set, *celeval.Compiler) (*Engine, error), sources ...policy.Source) *Engine {
	t.Helper()
	b, err := policy.Parse(sources)
	if err != nil {
		t.Fatalf("parse bundle: %v", err)
	}
	e, err := build(b, compiler)
	if err != nil {
		t.Fatalf("build the engine: %v", err)
	}
	return e
}

// deployment is a minimal apps/v1 Deployment.
func deployment(name, namespace string, replicas int64, labels map[string]any, images ...string) map[string]any {
	if len(images) == 0 {
		images = []string{"nginx:1.27"}
	}
	var containers []any
	for i, img := range images {
		containers = append(containers, map[string]any{"name": "c" + string(rune('0'+i)), "image": img})
	}
	meta := map[string]any{"name": name, "namespace": namespace}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   meta,
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": containers},
			},
		},
	}
}

type reqOpts struct {
	apiVersion  string
	operation   string
	group       string
	version     string
	resource    string
	subResource string
	kindGroup   string // when the kind's group differs from the resource's
	kind        string
	name        string
	namespace   string
	object      map[string]any
	oldObject   map[string]any
	username    string
	groups      []string
	dryRun      bool
}

// admissionReview renders the JSON body kube-apiserver would send.
func admissionReview(t *testing.T, o reqOpts) []byte {
	t.Helper()
	if o.apiVersion == "" {
		o.apiVersion = review.V1
	}
	if o.username == "" {
		o.username = "alice"
	}
	if o.groups == nil {
		o.groups = []string{"system:authenticated"}
	}
	kindGroup := o.group
	if o.kindGroup != "" {
		kindGroup = o.kindGroup
	}
	req := map[string]any{
		"uid":             "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":            map[string]any{"group": kindGroup, "version": o.version, "kind": o.kind},
		"resource":        map[string]any{"group": o.group, "version": o.version, "resource": o.resource},
		"requestKind":     map[string]any{"group": kindGroup, "version": o.version, "kind": o.kind},
		"requestResource": map[string]any{"group": o.group, "version": o.version, "resource": o.resource},
		"name":            o.name,
		"namespace":       o.namespace,
		"operation":       o.operation,
		"userInfo":        map[string]any{"username": o.username, "groups": o.groups},
		"dryRun":          o.dryRun,
	}
	if o.subResource != "" {
		req["subResource"] = o.subResource
		req["requestSubResource"] = o.subResource
	}
	if o.object != nil {
		req["object"] = o.object
	}
	if o.oldObject != nil {
		req["oldObject"] = o.oldObject
	}
	data, err := json.Marshal(map[string]any{"apiVersion": o.apiVersion, "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func deploymentRequest(t *testing.T, op string, d map[string]any) *review.Request {
	t.Helper()
	meta := d["metadata"].(map[string]any)
	body := admissionReview(t, reqOpts{operation: op, group: "apps", version: "v1", resource: "deployments", kind: "Deployment",
		name: meta["name"].(string), namespace: meta["namespace"].(string), object: d})
	r, err := review.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
