package main

import (
	"encoding/json"
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// decodeTestFile decodes a test file strictly. An error names the line
// and, inside a case, the case: "12: cases[0] (name): unknown field
// "alowed"", rather than the decoder's JSON-flavoured message.
func decodeTestFile(data []byte, tf *testFile) error {
	err := yaml.UnmarshalStrict(data, tf)
	if err == nil {
		return nil
	}
	var root yamlv3.Node
	if yamlv3.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return cleanDecodeError(err)
	}
	doc := root.Content[0]
	for i := 0; doc.Kind == yamlv3.MappingNode && i+1 < len(doc.Content); i += 2 {
		key, value := doc.Content[i], doc.Content[i+1]
		if key.Value != "cases" || value.Kind != yamlv3.SequenceNode {
			continue
		}
		for n, item := range value.Content {
			raw, merr := yamlv3.Marshal(item)
			if merr != nil {
				continue
			}
			var c testCase
			if cerr := yaml.UnmarshalStrict(raw, &c); cerr != nil {
				return fmt.Errorf("%d: cases[%d] (%s): %w", item.Line, n, caseName(item), cleanDecodeError(cerr))
			}
		}
	}
	return cleanDecodeError(err)
}

// caseName is a case node's name field, or "no name".
func caseName(item *yamlv3.Node) string {
	for i := 0; item.Kind == yamlv3.MappingNode && i+1 < len(item.Content); i += 2 {
		if item.Content[i].Value == "name" {
			return item.Content[i+1].Value
		}
	}
	return "no name"
}

// cleanDecodeError drops sigs.k8s.io/yaml's wrapping ("error unmarshaling
// JSON: while decoding JSON: json: "), which speaks of JSON to a YAML file.
func cleanDecodeError(err error) error {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return fmt.Errorf("%s", msg)
}

// checkTyped reports an object of a built-in kind that does not decode as
// that kind (a YAML 1.1 boolean such as y where a string belongs): an
// input error, which kubectl would refuse before any webhook saw it.
func checkTyped(obj map[string]any) error {
	if obj == nil {
		return nil
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	typed, err := scheme.Scheme.New(schema.FromAPIVersionAndKind(apiVersion, kind))
	if err != nil {
		return nil // not a built-in kind: its schema is in the cluster
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, typed); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.Contains(msg, "cannot unmarshal bool") {
			msg += " (quote YAML 1.1 booleans such as y, yes, on)"
		}
		return fmt.Errorf("not a valid %s: %s", kind, msg)
	}
	return nil
}
