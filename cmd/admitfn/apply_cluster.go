package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	corecluster "github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
	fncluster "github.com/admitfn/admitfn/functions/cluster"
)

// clusterOptions are apply --cluster's flags.
type clusterOptions struct {
	enabled       bool
	kubeconfig    string
	contexts      []string
	allNamespaces bool
	namespaceSet  bool // -n was given: only that namespace
	writeReports  bool
	deployment    string
}

// The reports' resources, when the cluster serves their CRDs.
var (
	policyReportsGVR        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	clusterPolicyReportsGVR = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
)

// clusterFile is where apply --cluster's resources come from, for reports.
const clusterFile = "cluster"

// listPageSize is how many objects one list call asks for.
const listPageSize = 500

// clusterManifests lists, read-only, every object of the kinds the
// bundle's webhooks can match on UPDATE, in the namespaces asked for, and
// the labels of every namespace.
func clusterManifests(ctx context.Context, cfg *rest.Config, namespace string, eng *engine.Engine) ([]manifest, namespaceList, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	namespaces := namespaceList{}
	nsList, err := listAll(ctx, dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}))
	if err != nil {
		return nil, nil, fmt.Errorf("list namespaces (their labels decide namespaceSelectors): %w", err)
	}
	for _, u := range nsList {
		var ns corev1.Namespace
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ns); err != nil {
			return nil, nil, fmt.Errorf("namespace %s: %w", u.GetName(), err)
		}
		namespaces[ns.Name] = &ns
	}
	resources, err := matchedResources(disco, eng)
	if err != nil {
		return nil, nil, err
	}
	var items []manifest
	for _, r := range resources {
		ri := dynamic.ResourceInterface(dyn.Resource(r.gvr))
		if r.namespaced && namespace != "" {
			ri = dyn.Resource(r.gvr).Namespace(namespace)
		} else if !r.namespaced && namespace != "" {
			continue // one namespace asked for: cluster-scoped kinds are outside it
		}
		objs, err := listAll(ctx, ri)
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", r.gvr, err)
		}
		for _, o := range objs {
			items = append(items, manifest{obj: o, file: clusterFile})
		}
	}
	return items, namespaces, nil
}

// namespaceList is the cluster's namespaces, whole: what namespaceObject
// and namespace selectors read in an audit.
type namespaceList map[string]*corev1.Namespace

func (l namespaceList) List(sel labels.Selector) ([]*corev1.Namespace, error) {
	var out []*corev1.Namespace
	for _, ns := range l {
		if sel.Matches(labels.Set(ns.Labels)) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// Get returns the namespace, or one with only its name when it was not
// listed (created since): what the function would know of it.
func (l namespaceList) Get(name string) (*corev1.Namespace, error) {
	if ns, ok := l[name]; ok {
		return ns, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

// labels are the namespaces' labels, for webhooks' namespaceSelectors.
func (l namespaceList) labels() map[string]map[string]string {
	out := make(map[string]map[string]string, len(l))
	for name, ns := range l {
		out[name] = ns.Labels
	}
	return out
}

type servedResource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// matchedResources are the served resources (no subresources) some rule of
// the bundle's webhooks matches on UPDATE, each in one version: the
// preferred one when a rule matches it, else the first a rule matches.
func matchedResources(disco discovery.DiscoveryInterface, eng *engine.Engine) ([]servedResource, error) {
	preferred := map[string]string{} // group → version
	groups, lists, err := disco.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	var rules []admissionregistrationv1.RuleWithOperations
	for _, g := range eng.Groups() {
		rules = append(rules, g.Rules...)
	}
	chosen := map[schema.GroupResource]servedResource{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			if !slices.ContainsFunc(rules, func(rule admissionregistrationv1.RuleWithOperations) bool {
				return ruleMatches(rule, gv.Group, gv.Version, r.Name, r.Namespaced)
			}) {
				continue
			}
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			if prev, ok := chosen[gr]; ok && prev.gvr.Version == preferred[gv.Group] {
				continue
			}
			if _, ok := chosen[gr]; !ok || gv.Version == preferred[gv.Group] {
				chosen[gr] = servedResource{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced}
			}
		}
	}
	out := make([]servedResource, 0, len(chosen))
	for _, r := range chosen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvr.String() < out[j].gvr.String() })
	return out, nil
}

// ruleMatches reports whether rule covers UPDATEs of the resource.
func ruleMatches(rule admissionregistrationv1.RuleWithOperations, group, version, resource string, namespaced bool) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	ops := make([]string, len(rule.Operations))
	for i, o := range rule.Operations {
		ops[i] = string(o)
	}
	if !has(ops, string(admissionregistrationv1.Update)) || !has(rule.APIGroups, group) || !has(rule.APIVersions, version) {
		return false
	}
	if !slices.Contains(rule.Resources, "*") && !slices.Contains(rule.Resources, "*/*") && !slices.Contains(rule.Resources, resource) {
		return false
	}
	if rule.Scope == nil {
		return true
	}
	switch *rule.Scope {
	case admissionregistrationv1.ClusterScope:
		return !namespaced
	case admissionregistrationv1.NamespacedScope:
		return namespaced
	}
	return true
}

// listAll lists every object of ri, page by page.
func listAll(ctx context.Context, ri dynamic.ResourceInterface) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		list, err := ri.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// restConfig loads the kubeconfig as kubectl does (--kubeconfig, else
// KUBECONFIG, else ~/.kube/config; --context) and returns its namespace.
func restConfig(kubeconfig, context string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's words point at KUBERNETES_MASTER, which kubectl no
		// longer reads.
		return nil, "", errors.New("kubeconfig: none found: name one with --kubeconfig, or set KUBECONFIG, or write ~/.kube/config")
	}
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "admitfn-apply"
	return cfg, ns, nil
}

// writeReportsToCluster applies the deployment's reports with server-side
// apply and deletes its reports in the namespaces reviewed that no longer
// have results. A report of that name that is not the deployment's (no
// managed-by and deployment labels: another tool's, or another admitfn
// deployment's) is neither replaced nor deleted; a delete is conditioned on
// the UID of the report checked, so one recreated meanwhile stays.
func writeReportsToCluster(ctx context.Context, cfg *rest.Config, reports []policyReport, reviewed []string, clusterReviewed bool, deployment string) error {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := disco.ServerResourcesForGroupVersion("wgpolicyk8s.io/v1alpha2"); err != nil {
		return fmt.Errorf("--write-reports: the cluster does not serve wgpolicyk8s.io/v1alpha2 (install the PolicyReport CRDs): %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	resource := func(ns string) dynamic.ResourceInterface {
		if ns == "" {
			return dyn.Resource(clusterPolicyReportsGVR)
		}
		return dyn.Resource(policyReportsGVR).Namespace(ns)
	}
	// present is the deployment's report in ns, nil when there is none; a
	// report of its name that is not its own is an error.
	present := func(ri dynamic.ResourceInterface, ns string) (*unstructured.Unstructured, error) {
		got, err := ri.Get(ctx, deployment, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the report %s: %w", reportPath(ns, deployment), err)
		}
		if l := got.GetLabels(); l[managedByLabel] != "admitfn" || l[deploymentLabel] != deployment {
			return nil, fmt.Errorf("the report %s is not this deployment's (it lacks the labels %s=admitfn and %s=%s): not replacing or deleting it; name this deployment's reports with --deployment", reportPath(ns, deployment), managedByLabel, deploymentLabel, deployment)
		}
		return got, nil
	}
	written := map[string]bool{}
	for _, rep := range reports {
		ns := rep.Metadata.Namespace
		ri := resource(ns)
		if _, err := present(ri, ns); err != nil {
			return err
		}
		raw, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, rep.Metadata.Name, types.ApplyPatchType, raw, metav1.PatchOptions{FieldManager: "admitfn", Force: ptrTo(true)}); err != nil {
			return fmt.Errorf("write %s %s: %w", rep.Kind, reportPath(ns, rep.Metadata.Name), err)
		}
		written[ns] = true
	}
	stale := func(ns string) error {
		if written[ns] {
			return nil
		}
		ri := resource(ns)
		got, err := present(ri, ns)
		if err != nil || got == nil {
			return err
		}
		uid := got.GetUID()
		err = ri.Delete(ctx, deployment, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the stale report %s: %w", reportPath(ns, deployment), err)
		}
		return nil
	}
	for _, ns := range reviewed {
		if err := stale(ns); err != nil {
			return err
		}
	}
	if clusterReviewed {
		return stale("")
	}
	return nil
}

// reportPath names a report in messages: namespace/name, or the name of a
// ClusterPolicyReport.
func reportPath(ns, name string) string {
	if ns == "" {
		return "ClusterPolicyReport " + name
	}
	return ns + "/" + name
}

func ptrTo[T any](v T) *T { return &v }

// auditCluster is apply --cluster: every object the bundle can match,
// reviewed as an UPDATE of itself, as an in-cluster audit does.
func (c *cli) auditCluster(o applyOptions, co clusterOptions, kubeContext string) ([]resourceResult, error) {
	eng, set, err := c.loadBundles(o.policies)
	if err != nil {
		return nil, err
	}
	cfg, ctxNamespace, err := restConfig(co.kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	// The authorizer and the params the bundle does not carry are the
	// cluster's, read as a function with cluster access reads them.
	reader, err := fncluster.NewReader(fncluster.Cluster{Name: kubeContext}, cfg)
	if err != nil {
		return nil, err
	}
	// A failed read's details (the URL, the server's answer), which the
	// results leave out as a function's answers do.
	reader.SetLog(zerolog.New(zerolog.ConsoleWriter{Out: c.err, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}))
	reviewCtx := corecluster.NewContext(context.Background(), reader)
	namespace := ctxNamespace
	switch {
	case co.allNamespaces:
		namespace = ""
	case co.namespaceSet:
		namespace = o.namespace
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	items, namespaces, err := clusterManifests(ctx, cfg, namespace, eng)
	if err != nil {
		return nil, err
	}
	// namespaceObject is the namespace as the cluster holds it, as
	// kube-apiserver's own policies see it.
	audit := eng.WithNamespaces(namespaces)
	declared := namespaces.labels()
	results := c.reviewAll(items, func(m manifest) resourceResult {
		return reviewManifest(reviewCtx, audit, set, m, m.obj, declared, o)
	})
	if co.writeReports {
		var reviewed []string
		if namespace != "" {
			reviewed = []string{namespace}
		} else {
			for ns := range declared {
				reviewed = append(reviewed, ns)
			}
			sort.Strings(reviewed)
		}
		if err := writeReportsToCluster(ctx, cfg, policyReports(results, c.now(), co.deployment), reviewed, namespace == "", co.deployment); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// auditFleet audits each context's cluster in turn and prints one report
// per cluster: a table under each cluster's name, or a JSON array of
// {cluster, report}. It exits 1 when a resource of any cluster is denied,
// unless --audit.
func (c *cli) auditFleet(o applyOptions, co clusterOptions) error {
	type clusterReport struct {
		Cluster string `json:"cluster"`
		Report  any    `json:"report"`
	}
	var reports []clusterReport
	denied := false
	for i, name := range co.contexts {
		results, err := c.auditCluster(o, co, name)
		if err != nil {
			return fmt.Errorf("context %s: %w", name, err)
		}
		for _, r := range results {
			denied = denied || r.Decision == decisionDenied || r.Decision == decisionError
		}
		if o.output == "json" {
			reports = append(reports, clusterReport{name, applyReport(results)})
			continue
		}
		if i > 0 {
			fmt.Fprintln(c.out)
		}
		fmt.Fprintf(c.out, "cluster %s:\n", name)
		c.writeApplyTable(results, o.showPatch)
	}
	if o.output == "json" {
		if err := writeJSON(c.out, reports); err != nil {
			return err
		}
	}
	if denied && !o.audit {
		return errReported
	}
	return nil
}
