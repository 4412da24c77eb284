// Package workload is a replayable write workload shaped like a real
// cluster's: nodes and controllers renewing leases and reporting status
// around rolling updates, beside people and CI changing Deployments,
// ConfigMaps and Services (docs/cluster.md, "Fewer calls", cites the rates).
// It also says, with kube-apiserver's own webhook matching packages, which
// of its writes reach a rendered webhook (apiserver.go).
package workload

import (
	"fmt"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Identity is who makes a write.
type Identity struct {
	User   string
	Groups []string
}

// Write is one request: a create, a merge patch (an update) or a delete,
// of a resource or one of its subresources, made as As.
type Write struct {
	As          Identity
	Verb        string // create, patch, delete
	Resource    schema.GroupVersionResource
	Kind        string
	Subresource string
	Namespace   string
	Name        string
	// Object is what a create sends; Old what a patch or a delete
	// finds; Patch the JSON merge patch a patch sends.
	Object, Old *unstructured.Unstructured
	Patch       []byte
	// Actor names who writes, for the mix: "kubelet", "replicaset-controller", "people", ….
	Actor string
	// mutated is the object as mutating webhooks have left it (With).
	mutated *unstructured.Unstructured
}

// With is w as a webhook sees it after earlier ones mutated its object.
func (w Write) With(obj *unstructured.Unstructured) Write {
	w.mutated = obj
	return w
}

// New is the object after the write: what a create sends, or what a patch
// makes of Old; nil for a delete.
func (w Write) New() (*unstructured.Unstructured, error) {
	if w.mutated != nil {
		return w.mutated, nil
	}
	switch w.Verb {
	case "create":
		return w.Object, nil
	case "patch":
		old, err := w.Old.MarshalJSON()
		if err != nil {
			return nil, err
		}
		merged, err := jsonpatch.MergePatch(old, w.Patch)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		return u, u.UnmarshalJSON(merged)
	}
	return nil, nil
}

// Model is a reference cluster over a window of time.
type Model struct {
	Nodes int
	// Window is the time the writes span.
	Window time.Duration
	// Rollouts is how many Deployments CI rolls out in the window, each
	// replacing Replicas pods one at a time.
	Rollouts, Replicas int
	// Namespace holds the applications; NamespaceLabels are its labels.
	Namespace       string
	NamespaceLabels map[string]string
}

// Default is the workload the tests and make bench play: a 20-node cluster
// over one minute, two rollouts of three replicas.
func Default() Model {
	return Model{Nodes: 20, Window: time.Minute, Rollouts: 2, Replicas: 3, Namespace: "workload",
		NamespaceLabels: map[string]string{"environment": "production", "team": "web"}}
}

// Documented defaults the rates follow (docs/cluster.md cites them).
const (
	nodeLeaseRenew   = 10 * time.Second // kubelet's node Lease
	nodeStatusReport = 5 * time.Minute  // kubelet's nodeStatusReportFrequency, status unchanged
	leaderRenew      = 2 * time.Second  // --leader-elect-retry-period of the controller manager and scheduler
)

var (
	gvrLease          = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	gvrNode           = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	gvrPod            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrEvent          = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	gvrConfigMap      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrService        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrDeployment     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrReplicaSet     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	gvrEndpointSlices = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

func node(i int) string { return fmt.Sprintf("node-%02d", i) }

func kubelet(i int) Identity {
	return Identity{"system:node:" + node(i), []string{"system:nodes", "system:authenticated"}}
}

func controller(name string) Identity {
	return Identity{"system:serviceaccount:kube-system:" + name, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
}

var (
	scheduler = Identity{"system:kube-scheduler", []string{"system:authenticated"}}
	manager   = Identity{"system:kube-controller-manager", []string{"system:authenticated"}}
	ci        = Identity{"ci-bot", []string{"ci", "system:authenticated"}}
	alice     = Identity{"alice", []string{"developers", "system:authenticated"}}
	bob       = Identity{"bob", []string{"developers", "system:authenticated"}}
)

func obj(apiVersion, kind, ns, name string, labels map[string]string, fields map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if ns != "" {
		meta["namespace"] = ns
	}
	if len(labels) > 0 {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		meta["labels"] = l
	}
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range fields {
		o[k] = v
	}
	return &unstructured.Unstructured{Object: o}
}

// app is the name of the i-th Deployment.
func app(i int) string { return fmt.Sprintf("web-%d", i) }

func appLabels(i int) map[string]string {
	return map[string]string{"app.kubernetes.io/name": app(i), "team": "web"}
}

func podSpec(image, nodeName string) map[string]any {
	spec := map[string]any{
		"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
		"containers": []any{map[string]any{
			"name": "web", "image": image, "imagePullPolicy": "Always",
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
				"limits":   map[string]any{"cpu": "500m", "memory": "256Mi"},
			},
			"securityContext": map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}},
		}},
	}
	if nodeName != "" {
		spec["nodeName"] = nodeName
	}
	return spec
}

func image(version string) string { return "registry.example.com/web:" + version }

func (m Model) deployment(i int) *unstructured.Unstructured {
	return obj("apps/v1", "Deployment", m.Namespace, app(i), appLabels(i), map[string]any{"spec": map[string]any{
		"replicas": int64(m.Replicas),
		"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": app(i)}},
		"template": map[string]any{"metadata": map[string]any{"labels": toAny(appLabels(i))}, "spec": podSpec(image("v1"), "")},
	}})
}

func (m Model) replicaSet(i int, version string, replicas int) *unstructured.Unstructured {
	labels := appLabels(i)
	return obj("apps/v1", "ReplicaSet", m.Namespace, app(i)+"-"+version, labels, map[string]any{"spec": map[string]any{
		"replicas": int64(replicas),
		"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": app(i)}},
		"template": map[string]any{"metadata": map[string]any{"labels": toAny(labels)}, "spec": podSpec(image(version), "")},
	}})
}

func (m Model) pod(i int, version string, k int) *unstructured.Unstructured {
	return obj("v1", "Pod", m.Namespace, fmt.Sprintf("%s-%s-%d", app(i), version, k), appLabels(i),
		map[string]any{"spec": podSpec(image(version), node((i*m.Replicas+k)%m.Nodes))})
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Existing are the objects the writes patch or delete, to create before
// playing them: the namespace first.
func (m Model) Existing() []*unstructured.Unstructured {
	out := []*unstructured.Unstructured{obj("v1", "Namespace", "", m.Namespace, m.NamespaceLabels, nil)}
	for i := 0; i < m.Nodes; i++ {
		out = append(out,
			obj("v1", "Node", "", node(i), map[string]string{"kubernetes.io/hostname": node(i)}, nil),
			obj("coordination.k8s.io/v1", "Lease", "kube-node-lease", node(i), nil, map[string]any{"spec": map[string]any{"holderIdentity": node(i), "leaseDurationSeconds": int64(40)}}))
	}
	for _, l := range []string{"kube-controller-manager", "kube-scheduler"} {
		out = append(out, obj("coordination.k8s.io/v1", "Lease", "kube-system", l, nil, map[string]any{"spec": map[string]any{"holderIdentity": l, "leaseDurationSeconds": int64(15)}}))
	}
	for i := 0; i < m.Rollouts; i++ {
		out = append(out, m.deployment(i), m.replicaSet(i, "v1", m.Replicas), m.replicaSet(i, "v2", 0),
			obj("v1", "Service", m.Namespace, app(i), appLabels(i), map[string]any{"spec": map[string]any{
				"selector": map[string]any{"app.kubernetes.io/name": app(i)}, "ports": []any{map[string]any{"port": int64(80)}}}}),
			obj("v1", "ConfigMap", m.Namespace, app(i)+"-config", appLabels(i), map[string]any{"data": map[string]any{"LOG_LEVEL": "info"}}),
			obj("discovery.k8s.io/v1", "EndpointSlice", m.Namespace, app(i)+"-slice", map[string]string{"kubernetes.io/service-name": app(i)},
				map[string]any{"addressType": "IPv4", "endpoints": []any{}, "ports": []any{map[string]any{"port": int64(8080)}}}))
		for k := 0; k < m.Replicas; k++ {
			out = append(out, m.pod(i, "v1", k), m.pod(i, "v2", k))
		}
	}
	return out
}

func at(t time.Duration) string {
	return fmt.Sprintf("2026-01-01T00:%02d:%02d.000000Z", int(t.Minutes()), int(t.Seconds())%60)
}

// Writes are the window's writes, in the order they are played.
func (m Model) Writes() []Write {
	var out []Write
	patch := func(actor string, as Identity, gvr schema.GroupVersionResource, sub string, old *unstructured.Unstructured, p string) {
		out = append(out, Write{Actor: actor, As: as, Verb: "patch", Resource: gvr, Kind: old.GetKind(), Subresource: sub,
			Namespace: old.GetNamespace(), Name: old.GetName(), Old: old, Patch: []byte(p)})
	}
	create := func(actor string, as Identity, gvr schema.GroupVersionResource, o *unstructured.Unstructured) {
		out = append(out, Write{Actor: actor, As: as, Verb: "create", Resource: gvr, Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Object: o})
	}
	del := func(actor string, as Identity, gvr schema.GroupVersionResource, old *unstructured.Unstructured) {
		out = append(out, Write{Actor: actor, As: as, Verb: "delete", Resource: gvr, Kind: old.GetKind(), Namespace: old.GetNamespace(), Name: old.GetName(), Old: old})
	}
	events := 0
	event := func(actor string, as Identity, involved *unstructured.Unstructured, reason string) {
		events++
		create(actor, as, gvrEvent, obj("v1", "Event", m.Namespace, fmt.Sprintf("%s.%d", involved.GetName(), events), nil, map[string]any{
			"involvedObject": map[string]any{"kind": involved.GetKind(), "name": involved.GetName(), "namespace": m.Namespace},
			"reason":         reason, "message": reason, "type": "Normal", "source": map[string]any{"component": actor}}))
	}
	existing := map[string]*unstructured.Unstructured{}
	for _, o := range m.Existing() {
		existing[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	get := func(kind, ns, name string) *unstructured.Unstructured { return existing[kind+"/"+ns+"/"+name] }

	// Heartbeats and leader election, spread over the window.
	for t := time.Duration(0); t < m.Window; t += leaderRenew {
		for _, l := range []struct {
			name string
			as   Identity
		}{{"kube-controller-manager", manager}, {"kube-scheduler", scheduler}} {
			patch("leader-election", l.as, gvrLease, "", get("Lease", "kube-system", l.name), fmt.Sprintf(`{"spec":{"renewTime":%q}}`, at(t)))
		}
		if t%nodeLeaseRenew == 0 {
			for i := 0; i < m.Nodes; i++ {
				patch("kubelet", kubelet(i), gvrLease, "", get("Lease", "kube-node-lease", node(i)), fmt.Sprintf(`{"spec":{"renewTime":%q}}`, at(t)))
			}
		}
	}
	statuses := int(int64(m.Nodes) * int64(m.Window) / int64(nodeStatusReport))
	for i := 0; i < statuses; i++ {
		patch("kubelet", kubelet(i), gvrNode, "status", get("Node", "", node(i)),
			fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q,"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, at(m.Window/2)))
	}

	// Rolling updates: CI changes the image; the deployment controller
	// surges one pod at a time; the ReplicaSet controller creates and
	// deletes pods, the scheduler places them, kubelets run and stop
	// them, the EndpointSlice controller follows their readiness.
	dc, rc, ec := controller("deployment-controller"), controller("replicaset-controller"), controller("endpointslice-controller")
	for i := 0; i < m.Rollouts; i++ {
		d := get("Deployment", m.Namespace, app(i))
		patch("ci", ci, gvrDeployment, "", d, `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"`+image("v2")+`"}]}}}}`)
		oldRS, newRS := get("ReplicaSet", m.Namespace, app(i)+"-v1"), get("ReplicaSet", m.Namespace, app(i)+"-v2")
		// A ReplicaSet of another template: the one the controller
		// creates (v2 exists already, for the updates below to find).
		create("deployment-controller", dc, gvrReplicaSet, m.replicaSet(i, "v3", 1))
		slice := get("EndpointSlice", m.Namespace, app(i)+"-slice")
		for k := 0; k < m.Replicas; k++ {
			patch("deployment-controller", dc, gvrReplicaSet, "", newRS, fmt.Sprintf(`{"spec":{"replicas":%d}}`, k+1))
			event("deployment-controller", dc, d, "ScalingReplicaSet")
			patch("deployment-controller", dc, gvrDeployment, "status", d, fmt.Sprintf(`{"status":{"updatedReplicas":%d}}`, k+1))
			created := m.pod(i, "v3", k)
			create("replicaset-controller", rc, gvrPod, created)
			event("replicaset-controller", rc, newRS, "SuccessfulCreate")
			event("scheduler", scheduler, created, "Scheduled")
			patch("replicaset-controller", rc, gvrReplicaSet, "status", newRS, fmt.Sprintf(`{"status":{"replicas":%d}}`, k+1))
			started := get("Pod", m.Namespace, fmt.Sprintf("%s-v2-%d", app(i), k))
			n := (i*m.Replicas + k) % m.Nodes
			for _, phase := range []string{`"Pending"`, `"Running"`, `"Running","conditions":[{"type":"Ready","status":"True"}]`} {
				patch("kubelet", kubelet(n), gvrPod, "status", started, `{"status":{"phase":`+phase+`}}`)
			}
			for _, reason := range []string{"Pulling", "Pulled", "Created", "Started"} {
				event("kubelet", kubelet(n), started, reason)
			}
			patch("endpointslice-controller", ec, gvrEndpointSlices, "", slice, fmt.Sprintf(`{"endpoints":[{"addresses":["10.0.%d.%d"],"conditions":{"ready":true}}]}`, i, k+10))
			patch("replicaset-controller", rc, gvrReplicaSet, "status", newRS, fmt.Sprintf(`{"status":{"readyReplicas":%d}}`, k+1))

			// Then one old pod goes.
			patch("deployment-controller", dc, gvrReplicaSet, "", oldRS, fmt.Sprintf(`{"spec":{"replicas":%d}}`, m.Replicas-k-1))
			event("deployment-controller", dc, d, "ScalingReplicaSet")
			stopped := get("Pod", m.Namespace, fmt.Sprintf("%s-v1-%d", app(i), k))
			del("replicaset-controller", rc, gvrPod, stopped)
			event("replicaset-controller", rc, oldRS, "SuccessfulDelete")
			patch("replicaset-controller", rc, gvrReplicaSet, "status", oldRS, fmt.Sprintf(`{"status":{"replicas":%d,"readyReplicas":%d}}`, m.Replicas-k-1, m.Replicas-k-1))
			patch("kubelet", kubelet(n), gvrPod, "status", stopped, `{"status":{"phase":"Succeeded"}}`)
			event("kubelet", kubelet(n), stopped, "Killing")
			del("kubelet", kubelet(n), gvrPod, stopped)
			patch("endpointslice-controller", ec, gvrEndpointSlices, "", slice, fmt.Sprintf(`{"endpoints":[{"addresses":["10.0.%d.%d"],"conditions":{"ready":true}}]}`, i, k+20))
		}
		patch("deployment-controller", dc, gvrDeployment, "status", d, fmt.Sprintf(`{"status":{"observedGeneration":%d}}`, 2))
	}

	// People: configuration and services.
	for i := 0; i < m.Rollouts; i++ {
		patch("people", alice, gvrConfigMap, "", get("ConfigMap", m.Namespace, app(i)+"-config"), `{"data":{"LOG_LEVEL":"debug"}}`)
		patch("people", bob, gvrService, "", get("Service", m.Namespace, app(i)), `{"metadata":{"labels":{"tier":"frontend"}}}`)
	}
	create("people", alice, gvrConfigMap, obj("v1", "ConfigMap", m.Namespace, "feature-flags", map[string]string{"team": "web"}, map[string]any{"data": map[string]any{"beta": "on"}}))
	return out
}

// Namespaces are the namespaces the writes are in, labelled as
// kube-apiserver labels them.
func (m Model) Namespaces() []*corev1.Namespace {
	var out []*corev1.Namespace
	for name, labels := range map[string]map[string]string{m.Namespace: m.NamespaceLabels, "kube-system": nil, "kube-node-lease": nil} {
		l := map[string]string{"kubernetes.io/metadata.name": name}
		for k, v := range labels {
			l[k] = v
		}
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
	}
	return out
}
