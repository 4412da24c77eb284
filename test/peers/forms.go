package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// readPolicies reads the ValidatingAdmissionPolicies of admitfn's YAML
// files; their bindings are left out: in the work, every policy applies to
// every request it matches.
func readPolicies(files []string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	var out []admissionregistrationv1.ValidatingAdmissionPolicy
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var vap admissionregistrationv1.ValidatingAdmissionPolicy
			if err := dec.Decode(&vap); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if vap.Kind == "ValidatingAdmissionPolicy" {
				out = append(out, vap)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ValidatingAdmissionPolicy in %v", files)
	}
	return out, nil
}

// kindName is a policy's name as a Gatekeeper constraint kind:
// pod-security-baseline.admitfn.io → PodSecurityBaselineAdmitfnIo.
func kindName(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '.' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// resourceKinds are the kinds of the resources a policy's rules name, for
// a Gatekeeper constraint's match, which names kinds.
var resourceKinds = map[string]string{
	"pods": "Pod", "deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet",
	"replicasets": "ReplicaSet", "jobs": "Job", "cronjobs": "CronJob",
}

// writeForms writes the policies in each peer's form, for its CLI:
// kyverno.yaml (ValidatingPolicies, for kyverno apply) and gatekeeper/
// (templates and constraints, for gator test).
func writeForms(vaps []admissionregistrationv1.ValidatingAdmissionPolicy, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "gatekeeper"), 0o755); err != nil {
		return err
	}
	var docs [][]byte
	for _, p := range kyvernoPolicies(vaps) {
		data, err := sigsyaml.Marshal(p)
		if err != nil {
			return err
		}
		docs = append(docs, data)
	}
	if err := os.WriteFile(filepath.Join(dir, "kyverno.yaml"), bytes.Join(docs, []byte("---\n")), 0o644); err != nil {
		return err
	}
	templs, constraints, _, err := gatekeeperObjects(vaps)
	if err != nil {
		return err
	}
	docs = nil
	for _, t := range templs {
		data, err := sigsyaml.Marshal(t)
		if err != nil {
			return err
		}
		docs = append(docs, data)
	}
	for _, c := range constraints {
		data, err := sigsyaml.Marshal(c.Object)
		if err != nil {
			return err
		}
		docs = append(docs, data)
	}
	return os.WriteFile(filepath.Join(dir, "gatekeeper", "policies.yaml"), bytes.Join(docs, []byte("---\n")), 0o644)
}
