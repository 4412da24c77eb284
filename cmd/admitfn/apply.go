package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/wI2L/jsondiff"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"

	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/validate"
)

// applyOptions are admitfn apply's flags.
type applyOptions struct {
	policies         []string
	files, oldFiles  []string
	namespaceLabels  []string
	namespaceAnnots  []string
	namespace        string
	user             string
	groups           []string
	output           string
	audit, showPatch bool
	sent             webhookNamespaces
	// strict fails the run when a namespaceSelector was matched without
	// the namespace's labels (unlabelledWarnings), or a binding reads of
	// the cluster what apply -f does not have (clusterWarnings).
	strict bool
}

func (c *cli) applyCmd() *cobra.Command {
	var (
		o  applyOptions
		co clusterOptions
	)
	cmd := &cobra.Command{
		Use:   "apply -p BUNDLE (-f FILE|DIR|- | --cluster) [flags]",
		Short: "Review manifests, or what a cluster holds, as the function would",
		Long: `Reviews every resource in the files, directories or standard input named by
-f (multi-document YAML, JSON, and v1 Lists such as kubectl get -o yaml
prints) as kube-apiserver would send it to the bundle's webhooks on CREATE,
or on UPDATE when --old-filename holds its previous version: mutating
webhooks first, then every validating webhook on the mutated object, each
when its namespaceSelector matches. Namespace labels come from Namespace
objects in the input and --namespace-labels; a namespaced resource without
a namespace is reviewed in --namespace, as kubectl would create it. A
binding whose namespaceSelector reads labels of a namespace given neither
way (helm template output names namespaces it does not define) is warned
about on standard error, and --strict makes that an error. The
requests are made as --as (a user) in --as-group.

Prints, per resource, the decision and each validation's result under each
binding: pass, fail (a Deny or Audit action), warn or error. -o json and
-o junit print reports, -o policyreport the wgpolicyk8s.io/v1alpha2
PolicyReports (one per namespace) and ClusterPolicyReport that
policy-reporter and other Policy WG tools read. Exits 1 when a resource is
denied, unless --audit.

With --cluster it audits a cluster instead (kubeconfig as kubectl loads
it, --context): it lists, read-only, every object of the kinds the
bundle's webhooks can match (discovery, then paginated lists in -n, the
context's namespace, or -A: every namespace and cluster-scoped kinds),
takes each namespace from the cluster (its labels for namespaceSelectors,
all of it for namespaceObject), asks the cluster's authorizer for the
authorizer (a SubjectAccessReview as --as in --as-group), reads the params
the bundle does not carry from the cluster, and reviews each object as an
UPDATE of itself, as an in-cluster audit does. --write-reports writes
the PolicyReports into the cluster. --context may be given several times,
for a fleet: each cluster is audited in turn, with its own report (table
and json output; --write-reports writes each cluster's into it).
docs/audit.md lists the RBAC it needs.`,
		Example: `  helm template chart/ | admitfn apply -p policies/ -f -
  kubectl get deploy,pods -A -o yaml | admitfn apply -p policies/ -f - --audit -o policyreport
  admitfn apply -p policies/ -f new.yaml --old-filename live.yaml --show-patch
  admitfn apply -p policies/ -f manifests/ --namespace-labels prod=env=production,tier=web
  admitfn apply -p platform-policies/ -p team-policies/ -f manifests/
  admitfn apply -p s3://my-bucket/admitfn --cluster -A --audit --write-reports
  admitfn apply -p policies/ --cluster -A --audit --context prod-eu --context prod-us`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output, "table", "json", "junit", "policyreport"); err != nil {
				return err
			}
			co.namespaceSet = cmd.Flags().Changed("namespace")
			if err := o.sent.check(); err != nil {
				return err
			}
			if errs := validation.IsDNS1123Subdomain(co.deployment); len(errs) > 0 {
				return usagef("--deployment %q: %s", co.deployment, errs[0])
			}
			switch {
			case co.enabled && len(o.files) > 0:
				return usagef("--cluster reviews what the cluster holds: it takes no -f/--filename")
			case !co.enabled && (co.allNamespaces || co.writeReports || co.kubeconfig != "" || len(co.contexts) > 0):
				return usagef("-A/--all-namespaces, --write-reports, --kubeconfig and --context need --cluster")
			case !co.enabled && len(o.files) == 0:
				return usagef("name the resources with -f/--filename: a file, a directory, or - for standard input (or audit a cluster with --cluster)")
			case len(co.contexts) > 1 && (o.output == "junit" || o.output == "policyreport"):
				return usagef("several --context print one report per cluster: use -o table or -o json, or --write-reports to write each cluster's into it")
			}
			return c.apply(o, co)
		},
	}
	policiesArrayFlag(cmd, &o.policies, policiesUsage)
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "resources: a YAML or JSON file, a directory of them, or - for standard input (repeatable)")
	cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	f.StringArrayVar(&o.oldFiles, "old-filename", nil, "previous versions of the resources: each resource found here by kind, namespace and name is reviewed as an UPDATE from it (repeatable)")
	f.StringArrayVar(&o.namespaceLabels, "namespace-labels", nil, "labels of a namespace the input does not define, NS=KEY=VALUE[,KEY=VALUE...] (repeatable)")
	f.StringArrayVar(&o.namespaceAnnots, "namespace-annotations", nil, "annotations of a namespace the input does not define, NS=KEY=VALUE[,KEY=VALUE...] (repeatable): namespaceObject reads them")
	f.StringVarP(&o.namespace, "namespace", "n", "default", "the namespace of namespaced resources that name none")
	f.StringVar(&o.user, "as", "admitfn-apply", "the username the requests are made as (request.userInfo.username)")
	f.StringArrayVar(&o.groups, "as-group", []string{"system:authenticated"}, "a group the requests are made as (repeatable)")
	f.BoolVar(&o.audit, "audit", false, "exit 0 even when resources are denied")
	f.BoolVar(&o.strict, "strict", false, "fail when a binding's namespaceSelector had to be matched without the labels of a namespace (no Namespace object in the input, no --namespace-labels), or a binding reads what apply -f cannot give it: a namespace the input does not define, the authorizer, params the bundle does not carry")
	f.BoolVar(&o.showPatch, "show-patch", false, "print the JSON Patch the mutating policies make of each resource")
	o.sent.flags(f)
	f.BoolVar(&co.enabled, "cluster", false, "review what a cluster holds instead of files: every object the bundle can match, as an UPDATE of itself (read-only)")
	f.StringVar(&co.kubeconfig, "kubeconfig", "", "with --cluster: the kubeconfig (default: KUBECONFIG, then ~/.kube/config)")
	f.StringArrayVar(&co.contexts, "context", nil, "with --cluster: the kubeconfig context (default: the current one); repeat it to audit several clusters in one run")
	f.BoolVarP(&co.allNamespaces, "all-namespaces", "A", false, "with --cluster: every namespace, and cluster-scoped objects (default: -n, else the context's namespace)")
	f.BoolVar(&co.writeReports, "write-reports", false, "with --cluster: write the PolicyReports to the cluster (its wgpolicyk8s.io CRDs must be installed), replacing this deployment's earlier ones")
	f.StringVar(&co.deployment, "deployment", defaultDeployment, "the name of the reports, and of the admitfn deployment they are for (label admitfn.io/deployment): --write-reports replaces and deletes only reports with that name and label, so deployments auditing one cluster keep their own")
	outputFlag(cmd, &o.output, "table", "json", "junit", "policyreport")
	return cmd
}

// resourceRef names a reviewed resource and where it was read.
type resourceRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	File       string `json:"file,omitempty"`
	Line       int    `json:"line,omitempty"`
}

func (r resourceRef) String() string {
	s := r.Kind + " "
	if r.Namespace != "" {
		s += r.Namespace + "/"
	}
	return s + r.Name
}

// ruleResult is one validation of one policy under one binding.
type ruleResult struct {
	Policy     string   `json:"policy"`
	Binding    string   `json:"binding"`
	Validation int      `json:"validation"`
	Result     string   `json:"result"` // pass, fail, warn, error
	Actions    []string `json:"validationActions,omitempty"`
	Message    string   `json:"message,omitempty"`
	Severity   string   `json:"severity,omitempty"`
}

// Rule is how reports name a result's rule: the binding and the
// validation's index.
func (r ruleResult) Rule() string { return fmt.Sprintf("%s/validations[%d]", r.Binding, r.Validation) }

// resourceResult is the review of one resource.
type resourceResult struct {
	Resource  resourceRef     `json:"resource"`
	Operation string          `json:"operation"`
	Decision  string          `json:"decision"` // allowed, denied, error, skipped
	Message   string          `json:"message,omitempty"`
	Code      int32           `json:"code,omitempty"`
	Warnings  []string        `json:"warnings,omitempty"`
	Audit     []string        `json:"audit,omitempty"` // audit annotations, key=value
	Results   []ruleResult    `json:"results,omitempty"`
	Patch     json.RawMessage `json:"patch,omitempty"`
}

// Decisions of a resource.
const (
	decisionAllowed = "allowed"
	decisionDenied  = "denied"
	decisionError   = "error"   // the review itself failed: the webhook's failurePolicy decides
	decisionSkipped = "skipped" // sent to no webhook (kube-system, --exclude-namespace)
)

func (c *cli) apply(o applyOptions, co clusterOptions) error {
	var results []resourceResult
	var err error
	if co.enabled && len(co.contexts) > 1 {
		return c.auditFleet(o, co)
	}
	if co.enabled {
		kubeContext := ""
		if len(co.contexts) == 1 {
			kubeContext = co.contexts[0]
		}
		results, err = c.auditCluster(o, co, kubeContext)
	} else {
		results, err = c.applyFiles(o)
	}
	if err != nil {
		return err
	}
	switch o.output {
	case "json":
		err = writeJSON(c.out, applyReport(results))
	case "junit":
		err = writeApplyJUnit(c.out, results)
	case "policyreport":
		err = writePolicyReports(c.out, results, c.now(), co.deployment)
	default:
		c.writeApplyTable(results, o.showPatch)
	}
	if err != nil {
		return err
	}
	for _, r := range results {
		if (r.Decision == decisionDenied || r.Decision == decisionError) && !o.audit {
			return errReported
		}
	}
	return nil
}

// applyFiles reviews the resources of the files as CREATEs (UPDATEs from
// their --old-filename versions).
func (c *cli) applyFiles(o applyOptions) ([]resourceResult, error) {
	eng, set, err := c.loadBundles(o.policies)
	if err != nil {
		return nil, err
	}
	declared, err := parseNamespaceLabels(o.namespaceLabels)
	if err != nil {
		return nil, err
	}
	items, err := c.readAllManifests(o.files, declared)
	if err != nil {
		return nil, err
	}
	olds := map[string]*unstructured.Unstructured{}
	if len(o.oldFiles) > 0 {
		previous, err := c.readAllManifests(o.oldFiles, nil)
		if err != nil {
			return nil, err
		}
		for _, m := range previous {
			defaultNamespace(m.obj, o.namespace)
			olds[identity(m.obj)] = m.obj
		}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no resources in %s", strings.Join(o.files, ", "))
	}
	annotations, err := parseNamespaceMap("--namespace-annotations", o.namespaceAnnots)
	if err != nil {
		return nil, err
	}
	input, err := namespacesOf(items, declared, annotations)
	if err != nil {
		return nil, err
	}
	warnings := unlabelledWarnings(set, eng.Groups(), items, declared, o)
	if len(warnings) > 0 && o.strict {
		for _, w := range warnings {
			fmt.Fprintf(c.err, "warning: %s\n", w)
		}
		return nil, fmt.Errorf("--strict: %d binding(s) matched without namespace labels: give them with Namespace objects or --namespace-labels", len(warnings))
	}
	warnings = append(warnings, clusterWarnings(set, items, input, o)...)
	for _, w := range warnings {
		fmt.Fprintf(c.err, "warning: %s\n", w)
	}
	if o.strict && len(warnings) > 0 {
		return nil, fmt.Errorf("--strict: %d binding(s) read what apply -f does not have", len(warnings))
	}
	ctx := cluster.NewContext(context.Background(), input)
	return c.reviewAll(items, func(m manifest) resourceResult {
		defaultNamespace(m.obj, o.namespace)
		return reviewManifest(ctx, eng, set, m, olds[identity(m.obj)], declared, o)
	}), nil
}

// unlabelledWarnings say, per binding whose namespaceSelector reads a
// namespace's labels, in which namespaces of the input it was matched
// without them: manifests such as helm template prints name namespaces
// they do not define, and a selector matched against no labels silently
// leaves the binding out.
func unlabelledWarnings(set *policy.Set, groups []*policy.Group, items []manifest, declared map[string]map[string]string, o applyOptions) []string {
	type binding struct {
		name     string
		selector *metav1.LabelSelector
		rules    []admissionregistrationv1.NamedRuleWithOperations
	}
	var bindings []binding
	add := func(name string, g *policy.Group, policyRules, bindingRules *admissionregistrationv1.MatchResources) {
		rules := policyRules.ResourceRules
		if bindingRules != nil && len(bindingRules.ResourceRules) > 0 {
			rules = bindingRules.ResourceRules
		}
		bindings = append(bindings, binding{name, g.NamespaceSelector, rules})
	}
	for _, g := range groups {
		if !readsLabels(g.NamespaceSelector) {
			continue
		}
		for _, b := range g.Bindings {
			if p := set.Policy(b.Spec.PolicyName); p != nil {
				add(b.Name, g, p.Spec.MatchConstraints, b.Spec.MatchResources)
			}
		}
		for _, b := range g.MutatingBindings {
			if p := set.MutatingPolicy(b.Spec.PolicyName); p != nil {
				add(b.Name, g, p.Spec.MatchConstraints, b.Spec.MatchResources)
			}
		}
	}
	unknown := make([][]string, len(bindings)) // the namespaces each was matched in without labels
	for _, m := range items {
		obj := m.obj.DeepCopy()
		defaultNamespace(obj, o.namespace)
		ns := obj.GetNamespace()
		if _, ok := declared[ns]; ok || ns == "" || o.sent.skips(ns) {
			continue
		}
		gvk := obj.GroupVersionKind()
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		for i, b := range bindings {
			for _, r := range b.rules {
				// As a CREATE, or an UPDATE with --old-filename.
				for _, op := range []admission.Operation{admission.Create, admission.Update} {
					attr := admission.NewAttributesRecord(nil, nil, gvk, ns, obj.GetName(), gvr, "", op, nil, false, nil)
					if (&rules.Matcher{Rule: admissionregistrationv1.RuleWithOperations(r.RuleWithOperations), Attr: attr}).Matches() && !slices.Contains(unknown[i], ns) {
						unknown[i] = append(unknown[i], ns)
					}
				}
			}
		}
	}
	var out []string
	for i, b := range bindings {
		if len(unknown[i]) == 0 {
			continue
		}
		sort.Strings(unknown[i])
		out = append(out, fmt.Sprintf("binding %s: namespaceSelector %q matched without the labels of namespace %s (no Namespace object in the input, no --namespace-labels): it may apply where the cluster would not, or not where it would",
			b.name, metav1.FormatLabelSelector(b.selector), strings.Join(unknown[i], ", ")))
	}
	return out
}

// readsLabels reports whether a namespaceSelector reads a label other than
// kubernetes.io/metadata.name, which every namespace has.
func readsLabels(s *metav1.LabelSelector) bool {
	if s == nil {
		return false
	}
	for k := range s.MatchLabels {
		if k != "kubernetes.io/metadata.name" {
			return true
		}
	}
	for _, e := range s.MatchExpressions {
		if e.Key != "kubernetes.io/metadata.name" {
			return true
		}
	}
	return false
}

// reviewAll reviews the items on every CPU, results in input order.
func (c *cli) reviewAll(items []manifest, review func(manifest) resourceResult) []resourceResult {
	results := make([]resourceResult, len(items))
	var done atomic.Int64
	stopProgress := c.progress(len(items), &done)
	defer stopProgress()
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = review(items[i])
				done.Add(1)
			}
		}()
	}
	for i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	return results
}

// readAllManifests reads every resource of the files; Namespace objects
// also give their labels to declared (when not nil).
func (c *cli) readAllManifests(paths []string, declared map[string]map[string]string) ([]manifest, error) {
	var items []manifest
	for _, path := range paths {
		files, err := manifestFiles([]string{path})
		if err != nil {
			return nil, err
		}
		fi, statErr := os.Stat(path)
		inDir := path != "-" && statErr == nil && fi.IsDir()
		for _, file := range files {
			found, err := c.readManifestFile(file, declared)
			if err != nil && inDir && errors.Is(err, errNotObject) {
				// A directory holds other YAML too (kustomization.yaml,
				// a chart's values): a named file must be objects.
				fmt.Fprintf(c.err, "warning: skipped %v\n", err)
				continue
			}
			if err != nil {
				return nil, err
			}
			items = append(items, found...)
		}
	}
	return items, nil
}

// readManifestFile reads the resources of one file ("-": standard input);
// Namespace objects also give their labels to declared (when not nil).
func (c *cli) readManifestFile(file string, declared map[string]map[string]string) ([]manifest, error) {
	var r io.Reader
	if file == "-" {
		var err error
		if r, err = c.stdin(); err != nil {
			return nil, err
		}
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var items []manifest
	labels := map[string]map[string]string{}
	err := readManifests(r, file, func(m manifest) error {
		if m.obj.GetAPIVersion() == "v1" && m.obj.GetKind() == "Namespace" {
			labels[m.obj.GetName()] = m.obj.GetLabels()
		}
		items = append(items, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for ns, l := range labels {
		if _, flagged := declared[ns]; declared != nil && !flagged {
			declared[ns] = l
		}
	}
	return items, nil
}

// parseNamespaceLabels reads --namespace-labels.
func parseNamespaceLabels(flags []string) (map[string]map[string]string, error) {
	return parseNamespaceMap("--namespace-labels", flags)
}

// parseNamespaceMap reads NS=KEY=VALUE[,KEY=VALUE...] flags.
func parseNamespaceMap(flag string, flags []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, f := range flags {
		ns, rest, ok := strings.Cut(f, "=")
		if !ok || ns == "" {
			return nil, usagef("%s %q: want NS=KEY=VALUE[,KEY=VALUE...]", flag, f)
		}
		if out[ns] == nil {
			out[ns] = map[string]string{}
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usagef("%s %q: want NS=KEY=VALUE[,KEY=VALUE...]", flag, f)
			}
			out[ns][k] = v
		}
	}
	return out, nil
}

// identity keys a resource for --old-filename: group, kind, namespace, name.
func identity(obj *unstructured.Unstructured) string {
	gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
	return gv.Group + "/" + obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// clusterScoped are the built-in kinds without a namespace (Kubernetes
// v1.37); any other kind is taken to be namespaced.
var clusterScoped = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/ComponentStatus": true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration": true, "admissionregistration.k8s.io/ValidatingWebhookConfiguration": true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy": true, "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy": true, "admissionregistration.k8s.io/MutatingAdmissionPolicyBinding": true,
	"apiextensions.k8s.io/CustomResourceDefinition": true, "apiregistration.k8s.io/APIService": true,
	"certificates.k8s.io/CertificateSigningRequest": true, "certificates.k8s.io/ClusterTrustBundle": true,
	"flowcontrol.apiserver.k8s.io/FlowSchema": true, "flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration": true,
	"networking.k8s.io/IngressClass": true, "networking.k8s.io/IPAddress": true, "networking.k8s.io/ServiceCIDR": true,
	"node.k8s.io/RuntimeClass": true, "rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"scheduling.k8s.io/PriorityClass": true, "storage.k8s.io/CSIDriver": true, "storage.k8s.io/CSINode": true,
	"storage.k8s.io/StorageClass": true, "storage.k8s.io/VolumeAttachment": true, "storage.k8s.io/VolumeAttributesClass": true,
	"resource.k8s.io/DeviceClass": true, "resource.k8s.io/ResourceSlice": true,
}

// defaultNamespace puts a namespaced resource that names no namespace in
// ns, as kube-apiserver does with the namespace of the request's URL.
func defaultNamespace(obj *unstructured.Unstructured, ns string) {
	gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
	if obj.GetNamespace() == "" && !clusterScoped[gv.Group+"/"+obj.GetKind()] {
		obj.SetNamespace(ns)
	}
}

// reviewManifest sends m to the bundle's webhooks as kube-apiserver would:
// each mutating one in order (reinvoked once when IfNeeded), stopping at a
// denial, then every validating one on the mutated object. It records each
// validation of each matching binding.
func reviewManifest(ctx context.Context, eng *engine.Engine, set *policy.Set, m manifest, old *unstructured.Unstructured, declared map[string]map[string]string, o applyOptions) resourceResult {
	obj := m.obj.Object
	ref := resourceRef{APIVersion: m.obj.GetAPIVersion(), Kind: m.obj.GetKind(), Namespace: m.obj.GetNamespace(), Name: m.obj.GetName(), UID: string(m.obj.GetUID()), File: displayFile(m.file), Line: m.line}
	tc := &testCase{Operation: admissionv1.Create, Object: obj, UserInfo: authenticationv1.UserInfo{Username: o.user, Groups: o.groups}}
	if old != nil {
		tc.Operation, tc.OldObject = admissionv1.Update, old.Object
	}
	res := resourceResult{Resource: ref, Operation: string(tc.Operation), Decision: decisionAllowed}
	if o.sent.skips(ref.Namespace) {
		res.Decision = decisionSkipped
		return res
	}
	fail := func(err error) resourceResult {
		res.Decision, res.Message = decisionError, err.Error()
		return res
	}
	if err := checkTyped(obj); err != nil {
		return fail(fmt.Errorf("input error: %w", err))
	}
	answer := func(r *engine.Result) bool {
		res.Warnings = append(res.Warnings, r.Response.Warnings...)
		for k, v := range r.Response.AuditAnnotations {
			res.Audit = append(res.Audit, k+"="+v)
		}
		if !r.Response.Allowed && res.Decision == decisionAllowed {
			res.Decision = decisionDenied
			if s := r.Response.Result; s != nil {
				res.Message, res.Code = s.Message, s.Code
			}
		}
		return r.Response.Allowed
	}

	obj, version, ok, err := mutateAll(ctx, eng, declared, tc, obj, answer)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return res
	}
	if version > 0 {
		ops, err := jsondiff.Compare(m.obj.Object, obj)
		if err != nil {
			return fail(fmt.Errorf("the patch of the mutations: %w", err))
		}
		if res.Patch, err = json.Marshal(ops); err != nil {
			return fail(err)
		}
	}
	// Validating webhooks do not change the object: one request serves all.
	req, err := request(tc, obj)
	if err != nil {
		return fail(err)
	}
	for _, g := range eng.Groups() {
		if g.Type != policy.Validating {
			continue
		}
		rctx, report := validate.WithReport(ctx)
		r, sent, err := sendTo(rctx, eng, g, declared, tc, obj, req)
		if err != nil {
			return fail(err)
		}
		if !sent {
			continue
		}
		answer(r)
		res.Results = append(res.Results, ruleResults(set, report.Evaluations)...)
	}
	sort.Strings(res.Audit)
	return res
}

// ruleResults turns a review's evaluations into results, by what each
// binding's validationActions make of a failure.
func ruleResults(set *policy.Set, evals []validate.Evaluation) []ruleResult {
	out := make([]ruleResult, 0, len(evals))
	for _, e := range evals {
		r := ruleResult{Policy: e.Policy, Binding: e.Binding, Validation: e.Index, Message: e.Message, Severity: severityOf(set, e.Policy)}
		var actions []admissionregistrationv1.ValidationAction
		for _, b := range set.Bindings {
			if b.Name == e.Binding {
				actions = b.Spec.ValidationActions
			}
		}
		for _, a := range actions {
			r.Actions = append(r.Actions, string(a))
		}
		switch {
		case e.Evaluation == validating.EvalError:
			r.Result = "error"
		case e.Action != validating.ActionDeny:
			r.Result, r.Message = "pass", ""
		case hasAction(actions, admissionregistrationv1.Deny) || hasAction(actions, admissionregistrationv1.Audit):
			r.Result = "fail"
		default:
			r.Result = "warn"
		}
		out = append(out, r)
	}
	return out
}

func hasAction(actions []admissionregistrationv1.ValidationAction, a admissionregistrationv1.ValidationAction) bool {
	for _, x := range actions {
		if x == a {
			return true
		}
	}
	return false
}

// severityAnnotations name a policy's severity, as Kyverno's policies and
// the PolicyReport's severity field spell it.
var severityAnnotations = []string{"admitfn.io/severity", "policies.kyverno.io/severity"}

var severities = regexp.MustCompile(`^(critical|high|medium|low|info)$`)

func severityOf(set *policy.Set, name string) string {
	for _, p := range set.Policies {
		if p.Name != name {
			continue
		}
		for _, a := range severityAnnotations {
			if v := strings.ToLower(p.Annotations[a]); severities.MatchString(v) {
				return v
			}
		}
	}
	return ""
}

// progress shows, on a terminal's stderr, how many resources are reviewed;
// the returned func clears the line.
func (c *cli) progress(total int, done *atomic.Int64) func() {
	f, ok := c.err.(*os.File)
	if !ok || !isTerminal(f) {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprint(f, "\r\x1b[K")
				return
			case <-t.C:
				fmt.Fprintf(f, "\rreviewed %d of %d resources", done.Load(), total)
			}
		}
	}()
	return func() { close(stop); <-finished }
}
