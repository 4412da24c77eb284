// Package policy is the bundle model: the ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy YAML an operator would apply in-cluster (policies,
// bindings, param objects), parsed,
// defaulted the way kube-apiserver defaults them, statically validated and
// grouped by what kube-apiserver can filter on before calling the function.
package policy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/admitfn/admitfn/core/internal/parallel"
)

// The policy API versions the bundle accepts. v1beta1 and v1 of
// ValidatingAdmissionPolicy share one schema, and so do v1beta1 (as users of
// Kubernetes 1.34 and 1.35 write it) and v1 of MutatingAdmissionPolicy: both
// decode strictly into the v1 types.
var policyGroupVersions = map[string]bool{
	"admissionregistration.k8s.io/v1":      true,
	"admissionregistration.k8s.io/v1beta1": true,
}

// Source is one file of a bundle.
type Source struct {
	Name string
	Data []byte
	// Documents, when set, is what Documents returns for Data, made
	// earlier (admitfn push publishes it): Parse then reads it instead of
	// the YAML. Nothing checks that it matches Data.
	Documents [][]byte
}

// Set is the parsed, defaulted and statically valid form of a bundle. Order
// is file order (files sorted by name) then document order.
type Set struct {
	// ID is a digest of the sources: the same files give the same ID.
	ID       string
	Policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// MutatingPolicies and MutatingBindings are the MutatingAdmissionPolicy
	// objects; policies apply in this order, each seeing the result of the
	// ones before it.
	MutatingPolicies []*admissionregistrationv1.MutatingAdmissionPolicy
	MutatingBindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Params holds every param object, in bundle order.
	Params []*unstructured.Unstructured
	// CRDs are the CustomResourceDefinitions the bundle carries: the
	// schemas of custom resources its policies match, which lint checks
	// mutations against. The function does nothing with them.
	CRDs []*unstructured.Unstructured
	// Origins maps "Kind/name" of each policy and binding to where it was
	// defined, for error messages.
	Origins map[string]Origin
}

var crdKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Origin is where a bundle object was defined.
type Origin struct {
	File     string
	Document int // 1-based
}

func (o Origin) String() string { return fmt.Sprintf("%s: document %d", o.File, o.Document) }

// OriginError is a problem with what a bundle file defines, and where:
// its text is Err's, which names the file already; Origin lets a tool
// point at the document's line.
type OriginError struct {
	Origin Origin
	Err    error
}

func (e *OriginError) Error() string { return e.Err.Error() }
func (e *OriginError) Unwrap() error { return e.Err }

// AtOrigin is err, found in what origin defines.
func AtOrigin(origin Origin, err error) error { return &OriginError{Origin: origin, Err: err} }

// Errors is every problem found in a bundle, up to MaxErrors; a bundle with
// any is rejected.
type Errors []error

// MaxErrors bounds the problems an Errors keeps: a bundle of 200,000 bad
// documents must not become a 200,000-line error kept in memory, logged as
// one line and shown by /readyz.
const MaxErrors = 100

// omitted stands for the problems past MaxErrors.
type omitted int

func (n omitted) Error() string { return fmt.Sprintf("… and %d more", int(n)) }

// Capped keeps the first MaxErrors problems and counts the rest.
func (e Errors) Capped() Errors {
	if len(e) <= MaxErrors {
		return e
	}
	return append(e[:MaxErrors:MaxErrors], omitted(len(e)-MaxErrors))
}

// Count is the number of problems, those past MaxErrors included.
func (e Errors) Count() int {
	if n := len(e); n > 0 {
		if more, ok := e[n-1].(omitted); ok {
			return n - 1 + int(more)
		}
	}
	return len(e)
}

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		// Keep a CEL error's source and caret lines under their error.
		lines[i] = strings.ReplaceAll(err.Error(), "\n", "\n    ")
	}
	what := "errors"
	if e.Count() == 1 {
		what = "error"
	}
	return fmt.Sprintf("%d %s in policy bundle:\n  %s", e.Count(), what, strings.Join(lines, "\n  "))
}

// LoadFS reads every .yaml, .yml and .json file under dir in fsys (recursively,
// skipping hidden files and directories, and test files) and parses them as
// one bundle.
func LoadFS(fsys fs.FS, dir string) (*Set, error) {
	sources, err := ReadFS(fsys, dir)
	if err != nil {
		return nil, err
	}
	return Parse(sources)
}

// ReadFS returns the files of the bundle under dir in fsys, as WalkFS finds
// them, named by their path relative to dir.
func ReadFS(fsys fs.FS, dir string) ([]Source, error) {
	var sources []Source
	err := WalkFS(fsys, dir, func(name, target string) error {
		data, err := fs.ReadFile(fsys, target)
		if err != nil {
			return err
		}
		sources = append(sources, Source{Name: name, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read policy bundle: %w", err)
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("read policy bundle: no .yaml, .yml or .json files in %q", dir)
	}
	return sources, nil
}

// IsBundleFile reports whether a file of this name is part of a bundle: a
// .yaml, .yml or .json file that is not a test file. (Hidden files and
// directories are not either; that is the caller's walk to skip.)
func IsBundleFile(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return !IsTestFile(name)
	}
	return false
}

// IsTestFile reports whether name is an `admitfn test` file (*_test.yaml,
// *_test.yml): test files sit beside the policies and are not part of the
// bundle.
func IsTestFile(name string) bool {
	return strings.HasSuffix(name, "_test.yaml") || strings.HasSuffix(name, "_test.yml")
}

// Parse builds a bundle from sources. It returns Errors listing every problem
// (decode errors, unknown kinds, invalid fields) rather than the first one.
// CEL is compiled later, by the validate package.
func Parse(sources []Source) (*Set, error) {
	return parse(sources, false)
}

func parse(sources []Source, lenient bool) (*Set, error) {
	sources = append([]Source(nil), sources...)
	sort.Slice(sources, func(i, j int) bool { return sources[i].Name < sources[j].Name })

	b := &Set{Origins: map[string]Origin{}, ID: ID(sources)}
	var errs Errors
	type pendingParam struct {
		obj    *unstructured.Unstructured
		origin Origin
	}
	var params []pendingParam

	// Documents decode on every CPU; they are added, and their errors
	// listed, in bundle order.
	type document struct {
		origin Origin
		data   []byte
		json   bool  // data is the document as JSON (Source.Documents)
		err    error // the file's, when it does not split into documents
	}
	type decoded struct {
		objs []object
		err  error
	}
	var docs []document
	for _, src := range sources {
		split, isJSON := src.Documents, true
		if split == nil {
			var err error
			if split, err = splitDocuments(src.Data); err != nil {
				docs = append(docs, document{err: fmt.Errorf("%s: %w", src.Name, err)})
				continue
			}
			isJSON = false
		}
		for i, doc := range split {
			if doc != nil {
				docs = append(docs, document{origin: Origin{File: src.Name, Document: i + 1}, data: doc, json: isJSON})
			}
		}
	}
	for i, d := range parallel.Map(docs, func(d document) decoded {
		if d.err != nil {
			return decoded{err: d.err}
		}
		data, err := d.data, error(nil)
		if !d.json {
			data, err = toJSON(d.data)
		}
		var objs []*unstructured.Unstructured
		if err == nil {
			objs, err = decodeDocument(data)
		}
		if err != nil {
			return decoded{err: AtOrigin(d.origin, fmt.Errorf("%s: %w", d.origin, err))}
		}
		out := make([]object, len(objs))
		for i, obj := range objs {
			out[i] = decodeObject(obj)
		}
		return decoded{objs: out}
	}) {
		if d.err != nil {
			errs = append(errs, d.err)
			continue
		}
		origin := docs[i].origin
		for _, o := range d.objs {
			if o.kind == "" {
				params = append(params, pendingParam{o.obj, origin})
				continue
			}
			if err := b.add(o, origin); err != nil {
				errs = append(errs, AtOrigin(origin, fmt.Errorf("%s: %w", origin, err)))
			}
		}
	}

	// Param objects are recognised by the paramKinds the policies name.
	paramKinds := map[schema.GroupVersionKind]bool{}
	for _, pk := range b.ParamKinds() {
		paramKinds[schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)] = true
	}
	seenParams := map[string]Origin{}
	for _, p := range params {
		gvk := p.obj.GroupVersionKind()
		if gvk == crdKind && !paramKinds[gvk] {
			b.CRDs = append(b.CRDs, p.obj)
			continue
		}
		if !paramKinds[gvk] {
			errs = append(errs, AtOrigin(p.origin, fmt.Errorf("%s: unknown kind %q (apiVersion %q): not a ValidatingAdmissionPolicy, MutatingAdmissionPolicy, one of their bindings, or the paramKind of any policy in the bundle", p.origin, gvk.Kind, p.obj.GetAPIVersion())))
			continue
		}
		if p.obj.GetName() == "" {
			errs = append(errs, AtOrigin(p.origin, fmt.Errorf("%s: %s: metadata.name is required", p.origin, gvk.Kind)))
			continue
		}
		key := gvk.String() + "/" + p.obj.GetNamespace() + "/" + p.obj.GetName()
		if prev, dup := seenParams[key]; dup {
			errs = append(errs, AtOrigin(p.origin, fmt.Errorf("%s: %s %q is already defined at %s", p.origin, gvk.Kind, qualifiedName(p.obj.GetNamespace(), p.obj.GetName()), prev)))
			continue
		}
		seenParams[key] = p.origin
		b.Params = append(b.Params, p.obj)
	}

	invalid, verrs := b.validate()
	errs = append(errs, verrs...)
	if len(errs) == 0 {
		return b, nil
	}
	if !lenient {
		return nil, errs.Capped()
	}
	b.drop(invalid)
	return b, errs.Capped()
}

// ParseLenient is Parse for a linter: with the errors, the set of what did
// load, without the objects that had errors and the bindings of a dropped
// policy, so that the rest can still be compiled and checked.
func ParseLenient(sources []Source) (*Set, Errors) {
	b, err := parse(sources, true)
	errs, _ := err.(Errors)
	return b, errs
}

// DropAt removes the policies and bindings defined at the origins given,
// and the bindings of a policy removed: what a linter leaves out of its
// checks once it has reported their errors.
func (b *Set) DropAt(origins map[Origin]bool) {
	invalid := map[string]bool{}
	for key, o := range b.Origins {
		if origins[o] {
			invalid[key] = true
		}
	}
	b.drop(invalid)
}

// drop removes the policies and bindings named "Kind/name" in invalid, and
// the bindings of a policy removed.
func (b *Set) drop(invalid map[string]bool) {
	keep := func(kind, name string) bool { return !invalid[kind+"/"+name] }
	b.Policies = slices.DeleteFunc(b.Policies, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
		return !keep("ValidatingAdmissionPolicy", p.Name)
	})
	b.MutatingPolicies = slices.DeleteFunc(b.MutatingPolicies, func(p *admissionregistrationv1.MutatingAdmissionPolicy) bool {
		return !keep("MutatingAdmissionPolicy", p.Name)
	})
	b.Bindings = slices.DeleteFunc(b.Bindings, func(pb *admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
		return !keep("ValidatingAdmissionPolicyBinding", pb.Name) || b.Policy(pb.Spec.PolicyName) == nil
	})
	b.MutatingBindings = slices.DeleteFunc(b.MutatingBindings, func(pb *admissionregistrationv1.MutatingAdmissionPolicyBinding) bool {
		return !keep("MutatingAdmissionPolicyBinding", pb.Name) || b.MutatingPolicy(pb.Spec.PolicyName) == nil
	})
}

func qualifiedName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// object is one object of a document: a policy or binding decoded strictly
// and defaulted, or (kind "") anything else, which may be a param object.
type object struct {
	obj   *unstructured.Unstructured
	kind  string
	typed interface{ GetName() string }
	err   error
}

// decodeObject decodes a policy or binding strictly (unknown fields are
// errors, as with kubectl's default strict field validation) and defaults
// it. It is safe for concurrent use.
func decodeObject(obj *unstructured.Unstructured) object {
	if !policyGroupVersions[obj.GetAPIVersion()] {
		return object{obj: obj}
	}
	kind := obj.GetKind()
	var into interface{ GetName() string }
	var setDefaults func()
	switch kind {
	case "ValidatingAdmissionPolicy":
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		into, setDefaults = p, func() { DefaultPolicy(p) }
	case "ValidatingAdmissionPolicyBinding":
		pb := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		into, setDefaults = pb, func() { DefaultBinding(pb) }
	case "MutatingAdmissionPolicy":
		p := &admissionregistrationv1.MutatingAdmissionPolicy{}
		into, setDefaults = p, func() { DefaultMutatingPolicy(p) }
	case "MutatingAdmissionPolicyBinding":
		pb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		into, setDefaults = pb, func() { DefaultMutatingBinding(pb) }
	default:
		return object{obj: obj}
	}
	if err := strictDecode(obj, into); err != nil {
		return object{obj: obj, kind: kind, err: fmt.Errorf("%s: %w", kind, err)}
	}
	setDefaults()
	return object{obj: obj, kind: kind, typed: into}
}

// add adds a decoded policy or binding, unless one of its kind and name is
// there already.
func (b *Set) add(o object, origin Origin) error {
	if o.err != nil {
		return o.err
	}
	key := o.kind + "/" + o.typed.GetName()
	if prev, dup := b.Origins[key]; dup && o.typed.GetName() != "" {
		return fmt.Errorf("%s %q is already defined at %s", o.kind, o.typed.GetName(), prev)
	}
	b.Origins[key] = origin
	switch t := o.typed.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		b.Policies = append(b.Policies, t)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		b.Bindings = append(b.Bindings, t)
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		b.MutatingPolicies = append(b.MutatingPolicies, t)
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		b.MutatingBindings = append(b.MutatingBindings, t)
	}
	return nil
}

// Origin returns where the named policy or binding of kind
// ("ValidatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", …) was
// defined.
func (b *Set) Origin(kind, name string) Origin { return b.Origins[kind+"/"+name] }

// Policy returns the ValidatingAdmissionPolicy with the given name, or nil.
func (b *Set) Policy(name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	for _, p := range b.Policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// MutatingPolicy returns the MutatingAdmissionPolicy with the given name, or
// nil.
func (b *Set) MutatingPolicy(name string) *admissionregistrationv1.MutatingAdmissionPolicy {
	for _, p := range b.MutatingPolicies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// ParamKinds lists the paramKind of every policy that has one, validating
// policies first, in bundle order.
func (b *Set) ParamKinds() []*admissionregistrationv1.ParamKind {
	var out []*admissionregistrationv1.ParamKind
	for _, p := range b.Policies {
		if p.Spec.ParamKind != nil {
			out = append(out, p.Spec.ParamKind)
		}
	}
	for _, p := range b.MutatingPolicies {
		if p.Spec.ParamKind != nil {
			out = append(out, p.Spec.ParamKind)
		}
	}
	return out
}

func strictDecode(obj *unstructured.Unstructured, into any) error {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(data, into, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = strings.TrimPrefix(e.Error(), "json: ")
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// splitDocuments splits multi-document YAML (or a JSON file). A document
// holding only comments or whitespace comes back as nil so numbering stays
// aligned with the file.
func splitDocuments(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read YAML documents: %w", err)
		}
		if isEmptyDocument(doc) {
			// The reader yields a leading empty document for a file that
			// starts with "---"; don't count it.
			if len(docs) == 0 && len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			docs = append(docs, nil)
			continue
		}
		docs = append(docs, doc)
	}
}

// DocumentLine is the line (1-based) where document n (1-based, counted as
// Origin counts them) of a bundle file starts: its first line that is not
// blank, a comment or a separator. It is 0 when the file has no document n.
func DocumentLine(data []byte, n int) int {
	starts := documentLines(data)
	if n < 1 || n > len(starts) {
		return 0
	}
	return starts[n-1]
}

// documentLines splits data into documents exactly as splitDocuments does
// (apimachinery's YAMLReader, then its filter) and returns where each one
// starts.
func documentLines(data []byte) []int {
	var starts []int
	var doc []byte
	first := 0 // the first content line of doc
	flush := func() {
		if isEmptyDocument(doc) && len(starts) == 0 && len(bytes.TrimSpace(doc)) == 0 {
			return
		}
		starts = append(starts, first)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok {
			if t := bytes.TrimSpace(rest); len(t) == 0 || t[0] == '#' {
				if len(doc) != 0 {
					flush()
					doc, first = nil, 0
					continue // the reader drops a separator that ends a document
				}
			}
		}
		doc = append(doc, line...)
		if first == 0 {
			if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
				first = i + 1
			}
		}
	}
	if len(doc) != 0 {
		flush()
	}
	return starts
}

func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' || bytes.Equal(line, []byte("---")) {
			continue
		}
		return false
	}
	return true
}

// Documents is a bundle file's documents as JSON, in file order, nil where
// a document holds only comments or whitespace: what Parse decodes, and
// reads from Source.Documents instead when it is set.
func Documents(data []byte) ([][]byte, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, err
	}
	for i, doc := range docs {
		if doc != nil {
			if docs[i], err = toJSON(doc); err != nil {
				return nil, fmt.Errorf("document %d: %w", i+1, err)
			}
		}
	}
	return docs, nil
}

// toJSON converts one YAML (or JSON) document to JSON.
func toJSON(doc []byte) ([]byte, error) {
	jsonData, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	return jsonData, nil
}

// decodeDocument turns one document, as JSON, into objects, expanding a v1
// List (the shape of `kubectl get -o yaml`).
func decodeDocument(jsonData []byte) ([]*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(jsonData, &m); err != nil || m == nil {
		return nil, errors.New("document is not a Kubernetes object (a YAML mapping with apiVersion and kind)")
	}
	obj := &unstructured.Unstructured{Object: m}
	if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
		return nil, errors.New("apiVersion and kind are required")
	}
	if obj.GetAPIVersion() == "v1" && obj.GetKind() == "List" {
		items, _, err := unstructured.NestedSlice(m, "items")
		if err != nil {
			return nil, fmt.Errorf("List: %w", err)
		}
		var out []*unstructured.Unstructured
		for i, item := range items {
			im, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("List: items[%d] is not an object", i)
			}
			u := &unstructured.Unstructured{Object: im}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				return nil, fmt.Errorf("List: items[%d]: apiVersion and kind are required", i)
			}
			out = append(out, u)
		}
		return out, nil
	}
	return []*unstructured.Unstructured{obj}, nil
}

// ID is the bundle ID of sources, whatever their order: the ID Parse gives
// the bundle they make.
func ID(sources []Source) string {
	sources = append([]Source(nil), sources...)
	sort.Slice(sources, func(i, j int) bool { return sources[i].Name < sources[j].Name })
	h := sha256.New()
	for _, s := range sources {
		fmt.Fprintf(h, "%s\x00%d\x00", s.Name, len(s.Data))
		h.Write(s.Data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ParamRefs lists every binding's paramRef with its policy's paramKind,
// validating bindings first, in bundle order.
func (b *Set) ParamRefs() []ParamUse {
	var out []ParamUse
	for _, pb := range b.Bindings {
		if p := b.Policy(pb.Spec.PolicyName); p != nil && p.Spec.ParamKind != nil && pb.Spec.ParamRef != nil {
			out = append(out, ParamUse{Kind: p.Spec.ParamKind, Ref: pb.Spec.ParamRef})
		}
	}
	for _, pb := range b.MutatingBindings {
		if p := b.MutatingPolicy(pb.Spec.PolicyName); p != nil && p.Spec.ParamKind != nil && pb.Spec.ParamRef != nil {
			out = append(out, ParamUse{Kind: p.Spec.ParamKind, Ref: pb.Spec.ParamRef})
		}
	}
	return out
}

// ParamUse is a binding's paramRef and the paramKind of its policy.
type ParamUse struct {
	Kind *admissionregistrationv1.ParamKind
	Ref  *admissionregistrationv1.ParamRef
}
