package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (c *cli) initCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "init DIR [--name NAME]",
		Short: "Start a bundle: a policy, its binding and a test file that passes",
		Long: `Writes, in DIR (made if needed), a ValidatingAdmissionPolicy and its
binding (NAME.yaml) and a test file (NAME_test.yaml) with a case the policy
allows and one it denies, which admitfn test DIR passes and admitfn lint DIR
finds nothing in. Edit them from there. Refuses to overwrite a file.`,
		Example: `  admitfn init policies/ --name require-team-label
  admitfn test policies/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("name the bundle directory to write: admitfn init DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return usagef("--name %q: %s", name, errs[0])
			}
			return c.init(args[0], name)
		},
	}
	cmd.Flags().StringVar(&name, "name", "require-team-label", "the policy's name, and its files' (a DNS label)")
	return cmd
}

// init writes the scaffold of a bundle into dir.
func (c *cli) init(dir, name string) error {
	files := []struct{ name, text string }{
		{name + ".yaml", scaffoldPolicy},
		{name + "_test.yaml", scaffoldTest},
	}
	for _, f := range files {
		if err := absent(filepath.Join(dir, f.name)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := createNew(path, []byte(strings.ReplaceAll(f.text, "NAME", name)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "wrote %s\n", path)
	}
	fmt.Fprintf(c.out, "next: admitfn test %s\n", dir)
	return nil
}

const scaffoldPolicy = `# A ValidatingAdmissionPolicy, as you would apply it in-cluster, and the
# binding that puts it in force. docs/policies.md says what each field does.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: NAME.example.com}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: "Deployments need a team label"
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: NAME}
spec:
  policyName: NAME.example.com
  validationActions: [Deny]
`

const scaffoldTest = `# Cases for the bundle in this directory: admitfn test runs them through
# the same engine the function serves with.
apiVersion: admitfn.io/v1alpha1
kind: PolicyTest
cases:
- name: a Deployment with a team label is allowed
  object:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop, labels: {team: shop}}
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: web, image: "nginx:1.27"}]}
  expect: {allowed: true}
- name: a Deployment without one is denied
  object:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop}
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: web, image: "nginx:1.27"}]}
  expect:
    allowed: false
    code: 422
    message: "ValidatingAdmissionPolicy 'NAME.example.com' with binding 'NAME' denied request: Deployments need a team label"
`
