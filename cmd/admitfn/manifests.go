package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// manifest is one resource read from the input, with where it came from.
type manifest struct {
	obj  *unstructured.Unstructured
	file string // "-" for standard input
	line int    // where its document starts
}

// maxDocument bounds one YAML document: far above any object kube-apiserver
// accepts (its request limit is 3 MiB), so a runaway input fails early.
const maxDocument = 32 << 20

// manifestFiles lists the files under each path (directories recursively:
// their .yaml, .yml and .json files, hidden ones skipped); "-" stays as is.
func manifestFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		if p == "-" {
			files = append(files, p)
			continue
		}
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or directory", p)
		}
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					found = append(found, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// readManifests decodes the resources of r, document by document as they
// arrive, calling fn for each: multi-document YAML, JSON, and v1 Lists
// (kubectl get -o yaml) expanded into their items. An error names the
// file and the line its document starts on.
func readManifests(r io.Reader, file string, fn func(manifest) error) error {
	return splitYAML(r, func(doc []byte, line int) error {
		objs, err := decodeManifest(doc)
		if err != nil {
			at, err := absoluteLine(doc, line, err)
			return fmt.Errorf("%s:%d: %w", displayFile(file), at, err)
		}
		for _, o := range objs {
			if err := fn(manifest{obj: o, file: file, line: line}); err != nil {
				return err
			}
		}
		return nil
	})
}

func displayFile(file string) string {
	if file == "-" {
		return "<stdin>"
	}
	return file
}

// splitYAML calls fn with each non-empty document of r and the line (1-based)
// of its first line of content. Documents are separated by lines that
// start with "---" followed by nothing or a comment, as in kubectl.
func splitYAML(r io.Reader, fn func(doc []byte, line int) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var doc bytes.Buffer
	first, n := 0, 0
	flush := func() error {
		defer func() { doc.Reset(); first = 0 }()
		if first == 0 {
			return nil // blank lines and comments only
		}
		return fn(bytes.Clone(doc.Bytes()), first)
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			n++
			if rest, ok := bytes.CutPrefix(line, []byte("---")); ok {
				if t := bytes.TrimSpace(rest); len(t) == 0 || t[0] == '#' {
					if ferr := flush(); ferr != nil {
						return ferr
					}
					continue
				}
			}
			if doc.Len()+len(line) > maxDocument {
				return fmt.Errorf("line %d: a document larger than %d MiB", n, maxDocument>>20)
			}
			doc.Write(line)
			if t := bytes.TrimSpace(line); first == 0 && len(t) > 0 && t[0] != '#' {
				first = n
			}
		}
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return err
		}
	}
}

var yamlLine = regexp.MustCompile(`^invalid YAML: yaml: line (\d+): `)

// absoluteLine turns the YAML parser's line, counted in the document, into
// the file's, and takes it out of the message: doc's first content line is
// the file's line first.
func absoluteLine(doc []byte, first int, err error) (int, error) {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return first, err
	}
	n, _ := strconv.Atoi(m[1])
	// Lines of the document before its first content line.
	before := 0
	for _, l := range bytes.SplitAfter(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			break
		}
		before++
	}
	return first - before + n - 1, errors.New("invalid YAML: " + strings.TrimPrefix(err.Error(), m[0]))
}

// errNotObject: a document that is YAML but no Kubernetes object (a
// kustomization.yaml without kind, a chart's values.yaml).
var errNotObject = errors.New("not a Kubernetes object")

// decodeManifest decodes one document into its objects.
func decodeManifest(doc []byte) ([]*unstructured.Unstructured, error) {
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: want a map with apiVersion and kind", errNotObject)
	}
	obj := &unstructured.Unstructured{Object: m}
	if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
		return nil, fmt.Errorf("%w: apiVersion and kind are required", errNotObject)
	}
	if !obj.IsList() {
		return []*unstructured.Unstructured{obj}, nil
	}
	items, _ := m["items"].([]any)
	out := make([]*unstructured.Unstructured, 0, len(items))
	for i, item := range items {
		im, ok := item.(map[string]any)
		o := &unstructured.Unstructured{Object: im}
		if !ok || o.GetAPIVersion() == "" || o.GetKind() == "" {
			return nil, fmt.Errorf("%s items[%d]: %w: apiVersion and kind are required", obj.GetKind(), i, errNotObject)
		}
		out = append(out, o)
	}
	return out, nil
}
