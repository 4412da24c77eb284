package lint

import (
	"os"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

// A mutation that builds a field its kind does not have, or a value of
// another type, is an error at its field, with the nearest name; a custom
// resource's fields come from its CRD in the bundle; a field one of a
// policy's kinds has is not reported.
func TestMutationShapes(t *testing.T) {
	data, err := os.ReadFile("testdata/mutation-shapes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range Set(bundle(t, string(data))) {
		if f.Rule == MutationShape {
			got = append(got, f.Field+": "+f.Message)
		}
	}
	const fails = ": kube-apiserver fails the mutation on every request it acts on"
	want := []string{
		`spec.mutations[0].applyConfiguration.expression: Object.spec.containers.securityContext has no field "runAsNonRot" in v1 Pod: did you mean "runAsNonRoot"?` + fails,
		`spec.mutations[1].jsonPatch.expression: JSONPatch path "/spec/containers/0/securityContext/runAsNonRot": /spec/containers/0/securityContext has no field "runAsNonRot" in v1 Pod: did you mean "runAsNonRoot"?` + fails,
		`spec.mutations[1].jsonPatch.expression: JSONPatch path "/spec/replica": /spec has no field "replica" in v1 Pod` + fails,
		`spec.mutations[2].applyConfiguration.expression: Object.spec sets hostNetwork to a string, where Pod wants a boolean` + fails,
		`spec.mutations[3].applyConfiguration.expression: Object.spec sets securityContext to a Object.spec.containers.securityContext, where kube-apiserver wants a Object.spec.securityContext`,
		`spec.mutations[0].applyConfiguration.expression: Object has no field "maxx" in rules.admitfn.io/v1 Limit: did you mean "max"?` + fails,
		`spec.mutations[1].jsonPatch.expression: JSONPatch path "/metadata/lables/x": /metadata has no field "lables" in rules.admitfn.io/v1 Limit: did you mean "labels"?` + fails,
		`spec.mutations[0].applyConfiguration.expression: Object.spec has no field "serviceNam" in apps/v1 Deployment, apps/v1 StatefulSet: did you mean "serviceName"?` + fails,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The bundle's CRDs are kept apart from its params: the function serves
// the bundle as if they were not there.
func TestCRDsAreNotParams(t *testing.T) {
	data, err := os.ReadFile("testdata/mutation-shapes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := bundle(t, string(data))
	if len(b.CRDs) != 1 || len(b.Params) != 0 || b.CRDs[0].GetName() != "limits.rules.admitfn.io" {
		t.Errorf("%d CRDs, %d params; want the one CRD, no params", len(b.CRDs), len(b.Params))
	}
	if _, err := engine.New(b, celeval.NewCompiler()); err != nil {
		t.Errorf("the engine refuses a bundle with a CRD: %v", err)
	}
}
