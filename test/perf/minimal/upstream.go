//go:build admitfn_upstream

// Built with -tags admitfn_upstream, the minimal server links every
// package of Kubernetes and cel-go that admitfn's core imports, and does
// nothing else with them: what their package initialisation, and a binary
// of their size, cost a cold start and resident memory before a single
// policy is loaded. It is the floor of P4 and P6 for any function built on
// kube-apiserver's own policy packages (test/perf's upstream floor;
// TestUpstreamFloorImports keeps the list in step with core/).
package main

import (
	_ "github.com/google/cel-go/cel"
	_ "github.com/google/cel-go/common/types"
	_ "github.com/google/cel-go/common/types/ref"
	_ "github.com/google/cel-go/common/types/traits"
	_ "github.com/google/cel-go/interpreter"
	_ "k8s.io/api/admission/v1"
	_ "k8s.io/api/admissionregistration/v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/api/errors"
	_ "k8s.io/apimachinery/pkg/api/meta"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	_ "k8s.io/apimachinery/pkg/labels"
	_ "k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/apimachinery/pkg/runtime/schema"
	_ "k8s.io/apimachinery/pkg/runtime/serializer/json"
	_ "k8s.io/apimachinery/pkg/types"
	_ "k8s.io/apimachinery/pkg/util/intstr"
	_ "k8s.io/apimachinery/pkg/util/json"
	_ "k8s.io/apimachinery/pkg/util/managedfields"
	_ "k8s.io/apimachinery/pkg/util/sets"
	_ "k8s.io/apimachinery/pkg/util/validation"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/apimachinery/pkg/util/version"
	_ "k8s.io/apimachinery/pkg/util/yaml"
	_ "k8s.io/apiserver/pkg/admission"
	_ "k8s.io/apiserver/pkg/admission/plugin/cel"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	_ "k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	_ "k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	_ "k8s.io/apiserver/pkg/apis/audit"
	_ "k8s.io/apiserver/pkg/apis/cel"
	_ "k8s.io/apiserver/pkg/authentication/user"
	_ "k8s.io/apiserver/pkg/authorization/authorizer"
	_ "k8s.io/apiserver/pkg/cel"
	_ "k8s.io/apiserver/pkg/cel/common"
	_ "k8s.io/apiserver/pkg/cel/environment"
	_ "k8s.io/apiserver/pkg/cel/library"
	_ "k8s.io/apiserver/pkg/cel/mutation"
	_ "k8s.io/apiserver/pkg/cel/openapi/resolver"
	_ "k8s.io/apiserver/pkg/warning"
	_ "k8s.io/client-go/applyconfigurations"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/listers/core/v1"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/kube-openapi/pkg/validation/spec"
	_ "sigs.k8s.io/json"
	_ "sigs.k8s.io/structured-merge-diff/v6/typed"
	_ "sigs.k8s.io/yaml"
)
