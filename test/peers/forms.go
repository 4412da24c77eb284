package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
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
