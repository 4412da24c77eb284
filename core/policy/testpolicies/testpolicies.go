// Package testpolicies reads every admission policy of the repository (its
// bundles and test fixtures) for tests that must hold for all of them.
package testpolicies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/admitfn/admitfn/core/policy"
)

// Dirs are the directories, relative to the repository's root, whose YAML
// files hold policies: the bundles, the CLI's and the benchmarks' fixtures
// and the compile tests' cases.
var Dirs = []string{"policies", "cmd/admitfn/testdata", "test/perf/testdata", "core/validate/testdata", "core/mutate/testdata"}

// Policies are the policies of one or more files, defaulted as a bundle's.
type Policies struct {
	Validating []*admissionregistrationv1.ValidatingAdmissionPolicy
	Mutating   []*admissionregistrationv1.MutatingAdmissionPolicy
}

// Repository reads the policies of every YAML file under Dirs of the
// repository whose root is root.
func Repository(root string) (Policies, error) {
	var all Policies
	for _, dir := range Dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && path == filepath.Join(root, dir) {
				return fs.SkipDir
			}
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			p, err := File(path)
			all.Validating = append(all.Validating, p.Validating...)
			all.Mutating = append(all.Mutating, p.Mutating...)
			return err
		})
		if err != nil {
			return Policies{}, err
		}
	}
	return all, nil
}

// File reads the policies of one YAML file; other objects are skipped.
func File(path string) (Policies, error) {
	var out Policies
	data, err := os.ReadFile(path)
	if err != nil {
		return out, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		var into runtime.Object
		switch u.GetKind() {
		case "ValidatingAdmissionPolicy":
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			into, out.Validating = p, append(out.Validating, p)
		case "MutatingAdmissionPolicy":
			p := &admissionregistrationv1.MutatingAdmissionPolicy{}
			into, out.Mutating = p, append(out.Mutating, p)
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			return out, fmt.Errorf("%s: %s: %w", path, u.GetName(), err)
		}
		switch p := into.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policy.DefaultPolicy(p)
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			policy.DefaultMutatingPolicy(p)
		}
	}
}
