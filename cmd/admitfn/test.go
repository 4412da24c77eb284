package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// testFile is a file of test cases for one bundle (docs/policies.md,
// "Testing policies").
type testFile struct {
	// APIVersion and Kind name the format: admitfn.io/v1alpha1 PolicyTest.
	// Files without them are read as that version.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Policies is the bundle, relative to the test file, or a list of
	// bundles the cases run against together (as a cluster holds them); by
	// default the test file's own directory.
	Policies bundleList `json:"policies,omitempty"`
	// Namespaces gives the labels of the namespaces cases use: the same as
	// cluster.namespaces with labels alone (namespaceSelectors match them,
	// namespaceObject reads them).
	Namespaces map[string]map[string]string `json:"namespaces,omitempty"`
	// Cluster, when set, is the cluster the cases run in, read as a
	// function with cluster access reads it (docs/cluster.md).
	Cluster *testCluster `json:"cluster,omitempty"`
	Cases   []testCase   `json:"cases"`
}

// The test file format this admitfn reads.
const (
	testAPIVersion = "admitfn.io/v1alpha1"
	testKind       = "PolicyTest"
)

type testCase struct {
	Name        string                       `json:"name"`
	Operation   admissionv1.Operation        `json:"operation,omitempty"`
	Namespace   string                       `json:"namespace,omitempty"`
	Object      map[string]any               `json:"object,omitempty"`
	OldObject   map[string]any               `json:"oldObject,omitempty"`
	Resource    *metav1.GroupVersionResource `json:"resource,omitempty"`
	SubResource string                       `json:"subResource,omitempty"`
	UserInfo    authenticationv1.UserInfo    `json:"userInfo,omitempty"`
	DryRun      bool                         `json:"dryRun,omitempty"`
	// ObjectFile and OldObjectFile name files (relative to the test file)
	// holding object and oldObject: a manifest as it is in the repository.
	ObjectFile    string `json:"objectFile,omitempty"`
	OldObjectFile string `json:"oldObjectFile,omitempty"`
	// ReviewFile names an AdmissionReview (relative to the test file), as
	// kube-apiserver sends it: the case is its request.
	ReviewFile string      `json:"reviewFile,omitempty"`
	Expect     expectation `json:"expect"`
}

// expectation is what a case must produce. allowed is required; message and
// code are checked when given; warnings and auditAnnotations always (absent
// means none); object, when given, must be contained in the object after
// every mutation.
type expectation struct {
	Allowed          *bool             `json:"allowed"`
	Message          *string           `json:"message,omitempty"`
	Code             *int32            `json:"code,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
	Object           map[string]any    `json:"object,omitempty"`
}

// outcome is what the bundle's webhooks, called as kube-apiserver calls
// them, made of a case.
type outcome struct {
	Allowed          bool              `json:"allowed"`
	Message          string            `json:"message,omitempty"`
	Code             int32             `json:"code,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
	Object           map[string]any    `json:"object,omitempty"`
}

type caseResult struct {
	File     string   `json:"file"`
	Name     string   `json:"name"`
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures,omitempty"`
	Outcome  *outcome `json:"outcome,omitempty"`
	// Warnings are about the case itself, not its outcome.
	Warnings []string `json:"warnings,omitempty"`
	Millis   float64  `json:"durationMs"`
}

func (c *cli) testCmd() *cobra.Command {
	var (
		output, runFilter string
		files, policies   []string
		sent              webhookNamespaces
	)
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run the test cases beside a bundle's policies",
		Long: `Runs the test cases in every *_test.yaml file under each PATH (a directory,
searched recursively, or a test file) against the policy bundle each file
names (by default the bundle in its own directory; a list of bundles runs
the cases against all of them together; -p/--policies overrides it). Each case is an admission request, sent to the bundle's webhooks as
kube-apiserver sends it: mutating webhooks first (reinvoked once when
reinvocationPolicy is IfNeeded), then validating webhooks on the mutated
object. It passes when the outcome is what the case expects.

Prints one line per case and, for a failure, what differs; -o json and
-o junit (JUnit XML, which CI systems show per case) print reports instead.
A test file that does not load fails on its own; the other files still run.
Exits 1 when a case or a file fails. docs/policies.md ("Testing policies")
describes the file format.`,
		Example: `  admitfn test policies/
  admitfn test policies/library/pod-security/pod-security_test.yaml
  admitfn test -p my-bundle.yaml tests/
  admitfn test policies/ --run 'replicas' -o junit > report.xml`,
		Args: cobra.ArbitraryArgs,
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json", "junit"); err != nil {
				return err
			}
			paths := append(files, args...)
			if len(paths) == 0 {
				return usagef("name at least one test file or directory: admitfn test policies/")
			}
			if err := sent.check(); err != nil {
				return err
			}
			filter, err := regexp.Compile(runFilter)
			if err != nil {
				return usagef("--run: %v", err)
			}
			return c.test(paths, policies, filter, output, sent)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, "a test file or a directory of them (repeatable; also taken as arguments)")
	cmd.MarkFlagFilename("filename", "yaml", "yml")
	policiesArrayFlag(cmd, &policies, "run every test file against this bundle instead of the one it names: "+strings.TrimPrefix(policiesUsage, "policy bundle: "))
	f.StringVar(&runFilter, "run", "", "run only the cases whose FILE/NAME matches this regular expression")
	sent.flags(f)
	outputFlag(cmd, &output, "text", "json", "junit")
	return cmd
}

// fileError is a test file that did not load: it fails on its own.
type fileError struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

func (c *cli) test(paths []string, override []string, filter *regexp.Regexp, output string, sent webhookNamespaces) error {
	var files []string
	for _, p := range paths {
		found, err := findTestFiles(p)
		if err != nil {
			return err
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return fmt.Errorf("no *_test.yaml files under %s", strings.Join(paths, ", "))
	}

	var overridden *engine.Engine
	if len(override) > 0 {
		eng, _, err := c.loadBundles(override)
		if err != nil {
			return err
		}
		overridden = eng
	}
	engines := map[string]*engine.Engine{}
	engineErrs := map[string]error{}
	var results []caseResult
	var fileErrs []fileError
	for _, file := range files {
		tf, err := readTestFile(file)
		if err != nil {
			fileErrs = append(fileErrs, fileError{file, err.Error()})
			continue
		}
		eng := overridden
		if eng == nil {
			dirs := tf.Policies
			if len(dirs) == 0 {
				dirs = bundleList{"."}
			}
			for i, dir := range dirs {
				if !filepath.IsAbs(dir) {
					dirs[i] = filepath.Join(filepath.Dir(file), dir)
				}
			}
			dir := strings.Join(dirs, string(filepath.ListSeparator))
			if _, seen := engines[dir]; !seen {
				engines[dir], _, engineErrs[dir] = c.loadBundles(dirs)
			}
			if err := engineErrs[dir]; err != nil {
				fileErrs = append(fileErrs, fileError{file, "policies: " + err.Error()})
				continue
			}
			eng = engines[dir]
		}
		for i := range tf.Cases {
			tc := &tf.Cases[i]
			if !filter.MatchString(file + "/" + tc.Name) {
				continue
			}
			start := time.Now()
			res := caseResult{File: file, Name: tc.Name, Warnings: caseWarnings(eng, tf, tc, sent)}
			ctx := context.Background()
			if tf.Cluster != nil {
				ctx = cluster.NewContext(ctx, tf.Cluster.reader())
			}
			got, err := play(ctx, eng, tf, tc, sent)
			if ierr := inputError(tc); ierr != nil {
				res.Failures = []string{ierr.Error()}
			} else if err != nil {
				res.Failures = []string{err.Error()}
			} else {
				res.Outcome = got
				res.Failures = compare(tc.Expect, got)
			}
			res.Passed = len(res.Failures) == 0
			res.Millis = float64(time.Since(start).Microseconds()) / 1000
			results = append(results, res)
		}
	}

	if len(results) == 0 && len(fileErrs) == 0 {
		return fmt.Errorf("no case matches --run %q", filter)
	}
	failed := 0
	for _, r := range results {
		if !r.Passed {
			failed++
		}
	}
	var err error
	switch output {
	case "json":
		err = writeJSON(c.out, struct {
			Passed int          `json:"passed"`
			Failed int          `json:"failed"`
			Cases  []caseResult `json:"cases"`
			Errors []fileError  `json:"errors,omitempty"`
		}{len(results) - failed, failed, results, fileErrs})
	case "junit":
		err = writeJUnit(c.out, results, fileErrs)
	default:
		colour := c.colour(c.out)
		for _, fe := range fileErrs {
			fmt.Fprintf(c.out, "%s %s: the file does not load\n       %s\n", paint(colour, "red", "FAIL"), fe.File, strings.ReplaceAll(fe.Error, "\n", "\n       "))
		}
		for _, r := range results {
			status := paint(colour, "green", "ok  ")
			if !r.Passed {
				status = paint(colour, "red", "FAIL")
			}
			fmt.Fprintf(c.out, "%s %s: %s\n", status, r.File, r.Name)
			for _, w := range r.Warnings {
				fmt.Fprintf(c.out, "       %s %s\n", paint(colour, "yellow", "warning:"), w)
			}
			for _, f := range r.Failures {
				fmt.Fprintf(c.out, "       %s\n", strings.ReplaceAll(f, "\n", "\n       "))
			}
		}
		summary := ""
		if len(fileErrs) > 0 {
			summary = ", " + plural(len(fileErrs), "file") + " did not load"
		}
		if failed > 0 || len(fileErrs) > 0 {
			fmt.Fprintf(c.out, "%s: %d of %s failed%s\n", paint(colour, "red", "FAIL"), failed, cases(len(results)), summary)
		} else {
			fmt.Fprintf(c.out, "%s: %s\n", paint(colour, "green", "PASS"), cases(len(results)))
		}
	}
	if err != nil {
		return err
	}
	if failed > 0 || len(fileErrs) > 0 {
		return errReported
	}
	return nil
}

func cases(n int) string {
	if n == 1 {
		return "1 case"
	}
	return fmt.Sprintf("%d cases", n)
}

// readFiles takes the case's objects, or its whole request, from the
// files it names, relative to dir.
func (c *testCase) readFiles(dir string) error {
	if c.ReviewFile != "" {
		if c.Operation != "" || c.Namespace != "" || c.Object != nil || c.OldObject != nil || c.ObjectFile != "" || c.OldObjectFile != "" ||
			c.Resource != nil || c.SubResource != "" || c.UserInfo.Username != "" || len(c.UserInfo.Groups) > 0 || c.DryRun {
			return fmt.Errorf("reviewFile is the whole request: give no operation, namespace, objects, resource, userInfo or dryRun beside it")
		}
		data, err := os.ReadFile(filepath.Join(dir, c.ReviewFile))
		if err != nil {
			return fmt.Errorf("reviewFile: %w", err)
		}
		req, err := review.Decode(data)
		if err != nil {
			return fmt.Errorf("reviewFile %s: %w", c.ReviewFile, err)
		}
		r := req.AdmissionRequest
		c.Operation, c.Namespace, c.SubResource, c.UserInfo = r.Operation, r.Namespace, r.SubResource, r.UserInfo
		c.DryRun = r.DryRun != nil && *r.DryRun
		gvr := r.Resource
		c.Resource = &gvr
		if req.Object != nil {
			c.Object = req.Object.Object
		}
		if req.OldObject != nil {
			c.OldObject = req.OldObject.Object
		}
		return nil
	}
	for _, f := range []struct {
		field, file string
		to          *map[string]any
	}{{"objectFile", c.ObjectFile, &c.Object}, {"oldObjectFile", c.OldObjectFile, &c.OldObject}} {
		if f.file == "" {
			continue
		}
		if *f.to != nil {
			return fmt.Errorf("%s and %s: give one", f.field, strings.TrimSuffix(f.field, "File"))
		}
		file, err := os.Open(filepath.Join(dir, f.file))
		if err != nil {
			return fmt.Errorf("%s: %w", f.field, err)
		}
		var objs []manifest
		err = readManifests(file, filepath.Join(dir, f.file), func(m manifest) error {
			objs = append(objs, m)
			return nil
		})
		file.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f.field, err)
		}
		if len(objs) != 1 {
			return fmt.Errorf("%s %s: want one object, found %d", f.field, f.file, len(objs))
		}
		*f.to = objs[0].obj.Object
	}
	return nil
}

// findTestFiles lists the test files at path: the file itself, or those
// under the directory.
func findTestFiles(dir string) ([]string, error) {
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or directory", dir)
		}
		return nil, err
	} else if !fi.IsDir() {
		return []string{dir}, nil
	}
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && policy.IsTestFile(d.Name()) {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// bundleList is a test file's policies: one bundle, or a list of them.
type bundleList []string

func (b *bundleList) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*b = bundleList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New("policies: want a bundle, or a list of bundles")
	}
	*b = list
	return nil
}

func readTestFile(path string) (*testFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tf testFile
	if err := decodeTestFile(data, &tf); err != nil {
		return nil, fmt.Errorf("%s:%s", path, prefixLine(err))
	}
	if tf.APIVersion != "" || tf.Kind != "" {
		if tf.APIVersion != testAPIVersion || tf.Kind != testKind {
			return nil, fmt.Errorf("%s: apiVersion %q, kind %q: this admitfn reads apiVersion %s, kind %s", path, tf.APIVersion, tf.Kind, testAPIVersion, testKind)
		}
	}
	if len(tf.Cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	if len(tf.Namespaces) > 0 {
		// namespaces: is cluster.namespaces given by labels alone: the
		// file describes a cluster, read as a function with cluster
		// access reads it (namespaceObject whole, the authorizer, params).
		if tf.Cluster == nil {
			tf.Cluster = &testCluster{}
		}
		for _, name := range slices.Sorted(maps.Keys(tf.Namespaces)) {
			if slices.ContainsFunc(tf.Cluster.Namespaces, func(ns corev1.Namespace) bool { return ns.Name == name }) {
				return nil, fmt.Errorf("%s: namespace %q is under both namespaces and cluster.namespaces: give it once, under cluster.namespaces", path, name)
			}
			ns := corev1.Namespace{}
			ns.Name, ns.Labels = name, maps.Clone(tf.Namespaces[name])
			tf.Cluster.Namespaces = append(tf.Cluster.Namespaces, ns)
		}
	}
	if tf.Cluster != nil {
		if err := tf.Cluster.check(path); err != nil {
			return nil, err
		}
		// The cluster's namespaces decide namespaceSelectors too.
		tf.Namespaces = map[string]map[string]string{}
		for _, ns := range tf.Cluster.Namespaces {
			tf.Namespaces[ns.Name] = ns.Labels
		}
	}
	names := map[string]bool{}
	for i, c := range tf.Cases {
		where := fmt.Sprintf("%s: cases[%d]", path, i)
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%s: name is required", where)
		case names[c.Name]:
			return nil, fmt.Errorf("%s: name %q is used twice", where, c.Name)
		case c.Expect.Allowed == nil:
			return nil, fmt.Errorf("%s (%s): expect.allowed is required", where, c.Name)
		}
		names[c.Name] = true
		if err := c.readFiles(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", where, c.Name, err)
		}
		tf.Cases[i] = c
		op := c.Operation
		if op == "" {
			op = admissionv1.Create
		}
		switch op {
		case admissionv1.Create, admissionv1.Update, admissionv1.Connect:
			if c.Object == nil {
				return nil, fmt.Errorf("%s (%s): %s needs object", where, c.Name, op)
			}
		case admissionv1.Delete:
			if c.OldObject == nil {
				return nil, fmt.Errorf("%s (%s): DELETE needs oldObject", where, c.Name)
			}
		default:
			return nil, fmt.Errorf("%s (%s): operation %q: want CREATE, UPDATE, DELETE or CONNECT", where, c.Name, c.Operation)
		}
		if op == admissionv1.Update && c.OldObject == nil {
			return nil, fmt.Errorf("%s (%s): UPDATE needs oldObject", where, c.Name)
		}
		tf.Cases[i].Operation = op
	}
	return &tf, nil
}

// play sends c to the bundle's webhooks as kube-apiserver would with the
// configuration `admitfn render` prints: each webhook whose
// namespaceSelector matches is called (none for kube-system, unless
// included, nor an excluded namespace) (the function itself
// applies every other criterion); mutating ones first, in order, those
// with reinvocationPolicy IfNeeded once more if a later one changed the
// object; then the validating ones on the final object.
func play(ctx context.Context, eng *engine.Engine, tf *testFile, c *testCase, sent webhookNamespaces) (*outcome, error) {
	obj := c.Object
	out := &outcome{Allowed: true}
	if sent.skips(namespaceOf(c)) {
		// The rendered webhooks exclude kube-system by default, and the
		// namespaces excluded with --exclude-namespace.
		if c.Operation != admissionv1.Delete {
			out.Object = obj
		}
		return out, nil
	}
	answer := func(res *engine.Result) bool {
		out.Warnings = append(out.Warnings, res.Response.Warnings...)
		for k, v := range res.Response.AuditAnnotations {
			if out.AuditAnnotations == nil {
				out.AuditAnnotations = map[string]string{}
			}
			out.AuditAnnotations[k] = v
		}
		if !res.Response.Allowed {
			out.Allowed = false
			if s := res.Response.Result; s != nil {
				out.Message, out.Code = s.Message, s.Code
			}
		}
		return res.Response.Allowed
	}
	if c.Operation != admissionv1.Delete {
		var ok bool
		var err error
		if obj, _, ok, err = mutateAll(ctx, eng, tf.Namespaces, c, obj, answer); err != nil || !ok {
			return out, err
		}
	}
	// The first denial ends the request.
	call := func(g *policy.Group) (bool, error) {
		res, sent, err := sendTo(ctx, eng, g, tf.Namespaces, c, obj, nil)
		if err != nil || !sent {
			return err == nil, err
		}
		return answer(res), nil
	}
	groups := eng.Groups()
	for _, g := range groups {
		if g.Type != policy.Validating {
			continue
		}
		ok, err := call(g)
		if err != nil || !ok {
			return out, err
		}
	}
	if c.Operation != admissionv1.Delete {
		out.Object = obj
	}
	return out, nil
}

// mutateAll sends c with obj through the bundle's mutating webhooks as
// kube-apiserver's mutating dispatcher does: each in order; a change to the
// object marks every IfNeeded webhook called since the last change for
// reinvocation, and a second round calls the marked ones in order (a
// change there marks those called since, which a later one in the round
// then is). answer sees each response and says whether the request goes
// on. It returns the mutated object, how many patches changed it, and
// whether no webhook denied it.
func mutateAll(ctx context.Context, eng *engine.Engine, declared map[string]map[string]string, c *testCase, obj map[string]any, answer func(*engine.Result) bool) (map[string]any, int, bool, error) {
	version := 0
	var previous, reinvoke []*policy.Group
	again := false
	call := func(g *policy.Group) (bool, error) {
		res, sent, err := sendTo(ctx, eng, g, declared, c, obj, nil)
		if err != nil || !sent {
			return err == nil, err
		}
		if !answer(res) {
			return false, nil
		}
		if len(res.Response.Patch) > 0 {
			patched, err := applyPatch(obj, res.Response.Patch)
			if err != nil {
				return false, fmt.Errorf("%s: apply the patch: %w", g.Path(), err)
			}
			if !equality.Semantic.DeepEqual(patched, obj) {
				reinvoke = append(reinvoke, previous...)
				previous, again = nil, true
			}
			obj = patched
			version++
		}
		if g.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			previous = append(previous, g)
		}
		return true, nil
	}
	var mutating []*policy.Group
	for _, g := range eng.Groups() {
		if g.Type == policy.Mutating {
			mutating = append(mutating, g)
		}
	}
	for _, g := range mutating {
		if ok, err := call(g); err != nil || !ok {
			return obj, version, false, err
		}
	}
	if !again {
		return obj, version, true, nil
	}
	for _, g := range mutating {
		if !slices.Contains(reinvoke, g) {
			continue
		}
		if ok, err := call(g); err != nil || !ok {
			return obj, version, false, err
		}
	}
	return obj, version, true, nil
}

// prefixLine turns decodeTestFile's "12: …" into ":12: …" after the path,
// and anything else into ": …".
func prefixLine(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 && strings.Trim(msg[:i], "0123456789") == "" {
		return msg
	}
	return " " + msg
}

// inputError reports a case whose objects do not decode as their kinds.
func inputError(c *testCase) error {
	for field, obj := range map[string]map[string]any{"object": c.Object, "oldObject": c.OldObject} {
		if err := checkTyped(obj); err != nil {
			return fmt.Errorf("input error in %s: %w", field, err)
		}
	}
	return nil
}

// caseWarnings notes what makes a case test something other than its
// author meant: a namespace the file does not declare, which some webhook
// then skips for want of a label.
func caseWarnings(eng *engine.Engine, tf *testFile, c *testCase, sent webhookNamespaces) []string {
	ns := namespaceOf(c)
	if ns == "" || sent.skips(ns) { // sent to no webhook
		return nil
	}
	if _, ok := tf.Namespaces[ns]; ok {
		return nil
	}
	only := labels.Set{"kubernetes.io/metadata.name": ns}
	for _, g := range eng.Groups() {
		if g.NamespaceSelector == nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(g.NamespaceSelector); err == nil && !sel.Matches(only) {
			return []string{fmt.Sprintf("namespace %q is not declared under namespaces: its only label is kubernetes.io/metadata.name, so the webhook %s is not called", ns, g.Path())}
		}
	}
	return nil
}

// sendTo calls group g's webhook as kube-apiserver would for c with the
// object as it stands, when the webhook's namespaceSelector matches (sent
// is false when it does not). declared holds the labels of the namespaces
// the input declares.
//
// req, when given, is the request already built for obj: validating
// webhooks, which do not change the object, share one.
func sendTo(ctx context.Context, eng *engine.Engine, g *policy.Group, declared map[string]map[string]string, c *testCase, obj map[string]any, req *review.Request) (res *engine.Result, sent bool, err error) {
	if g.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(g.NamespaceSelector)
		if err != nil {
			return nil, false, err
		}
		if ls, selected := namespaceLabels(c, obj, declared); selected && !sel.Matches(ls) {
			return nil, false, nil
		}
	}
	if req == nil {
		if req, err = request(c, obj); err != nil {
			return nil, false, err
		}
	}
	res, err = eng.Review(ctx, g.Route(), req)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", g.Path(), err)
	}
	return res, true, nil
}

// namespaceLabels are the labels a webhook's namespaceSelector is matched
// against: the object's namespace's (which kube-apiserver always labels
// kubernetes.io/metadata.name), a Namespace's own, and none for other
// cluster-scoped objects, which the selector does not select (selected is
// false).
func namespaceLabels(c *testCase, obj map[string]any, declared map[string]map[string]string) (ls labels.Set, selected bool) {
	src := obj
	if src == nil {
		src = c.OldObject
	}
	name := namespaceOf(c)
	if kind, _ := src["kind"].(string); kind == "Namespace" && src["apiVersion"] == "v1" {
		md, _ := src["metadata"].(map[string]any)
		name, _ = md["name"].(string)
		ls = labels.Set{}
		if l, ok := md["labels"].(map[string]any); ok {
			for k, v := range l {
				ls[k], _ = v.(string)
			}
		}
	} else if name == "" {
		return nil, false
	} else {
		ls = labels.Set{}
		for k, v := range declared[name] {
			ls[k] = v
		}
	}
	ls["kubernetes.io/metadata.name"] = name
	return ls, true
}

func namespaceOf(c *testCase) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	for _, o := range []map[string]any{c.Object, c.OldObject} {
		if md, ok := o["metadata"].(map[string]any); ok {
			if ns, ok := md["namespace"].(string); ok {
				return ns
			}
		}
	}
	return ""
}

// request is the AdmissionRequest kube-apiserver would send for c with the
// object as it stands, decoded as the function decodes it.
func request(c *testCase, obj map[string]any) (*review.Request, error) {
	src := obj
	if src == nil {
		src = c.OldObject
	}
	apiVersion, _ := src["apiVersion"].(string)
	kind, _ := src["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, fmt.Errorf("the object needs apiVersion and kind")
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("object apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	if c.Resource != nil {
		gvr = schema.GroupVersionResource(*c.Resource)
	}
	name := ""
	if md, ok := src["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	req := admissionv1.AdmissionRequest{
		UID:         "00000000-0000-4000-8000-000000000000",
		Kind:        metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:    metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		SubResource: c.SubResource,
		Name:        name,
		Namespace:   namespaceOf(c),
		Operation:   c.Operation,
		UserInfo:    c.UserInfo,
		DryRun:      &c.DryRun,
	}
	req.RequestKind, req.RequestResource, req.RequestSubResource = &req.Kind, &req.Resource, req.SubResource
	body, err := json.Marshal(struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Request    map[string]any `json:"request"`
	}{"admission.k8s.io/v1", "AdmissionReview", requestMap(&req, obj, c.OldObject)})
	if err != nil {
		return nil, err
	}
	return review.Decode(body)
}

func requestMap(req *admissionv1.AdmissionRequest, obj, old map[string]any) map[string]any {
	raw, _ := json.Marshal(req) // plain API types: cannot fail
	var m map[string]any
	json.Unmarshal(raw, &m)
	if obj != nil && req.Operation != admissionv1.Delete {
		m["object"] = obj
	}
	if old != nil {
		m["oldObject"] = old
	}
	return m
}

func applyPatch(obj map[string]any, patch []byte) (map[string]any, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if raw, err = p.Apply(raw); err != nil {
		return nil, err
	}
	var out map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	return out, d.Decode(&out)
}

// compare lists how got differs from want, one readable line each.
func compare(want expectation, got *outcome) []string {
	var diffs []string
	if *want.Allowed != got.Allowed {
		d := fmt.Sprintf("allowed: got %v, want %v", got.Allowed, *want.Allowed)
		if !got.Allowed {
			d += fmt.Sprintf(" (denied with %q)", got.Message)
		}
		diffs = append(diffs, d)
	}
	if want.Message != nil && *want.Message != got.Message {
		diffs = append(diffs, fmt.Sprintf("message:\n  got:  %q\n  want: %q", got.Message, *want.Message))
	}
	if want.Code != nil && *want.Code != got.Code {
		diffs = append(diffs, fmt.Sprintf("code: got %d, want %d", got.Code, *want.Code))
	}
	if !reflect.DeepEqual(nonNil(want.Warnings), nonNil(got.Warnings)) {
		diffs = append(diffs, fmt.Sprintf("warnings:\n  got:  %s\n  want: %s", quoteAll(got.Warnings), quoteAll(want.Warnings)))
	}
	if !reflect.DeepEqual(mapOrEmpty(want.AuditAnnotations), mapOrEmpty(got.AuditAnnotations)) {
		diffs = append(diffs, fmt.Sprintf("auditAnnotations:\n  got:  %s\n  want: %s", jsonText(got.AuditAnnotations), jsonText(want.AuditAnnotations)))
	}
	if want.Object != nil {
		diffs = append(diffs, contains("object", normalise(want.Object), normalise(got.Object))...)
	}
	return diffs
}

// contains lists where got does not hold what want has: maps may have more
// keys, and a key whose wanted value is null must be absent; lists and
// scalars must be equal (lists element by element).
func contains(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want an object", path, jsonText(got))}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var diffs []string
		for _, k := range keys {
			gv, ok := g[k]
			if w[k] == nil { // null: the field must be absent
				if ok && gv != nil {
					diffs = append(diffs, fmt.Sprintf("%s.%s: got %s, want it absent", path, k, jsonText(gv)))
				}
				continue
			}
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing, want %s", path, k, jsonText(w[k])))
				continue
			}
			diffs = append(diffs, contains(path+"."+k, w[k], gv)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %s, want %s", path, jsonText(got), jsonText(want))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, contains(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: got %s, want %s", path, jsonText(got), jsonText(want))}
		}
		return nil
	}
}

// normalise gives YAML- and JSON-decoded values one shape (float64
// numbers).
func normalise(v map[string]any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	json.Unmarshal(raw, &out)
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func mapOrEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func quoteAll(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	q := make([]string, len(s))
	for i, w := range s {
		q[i] = fmt.Sprintf("%q", w)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func jsonText(v any) string {
	if m, ok := v.(map[string]string); ok && len(m) == 0 {
		return "none"
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
