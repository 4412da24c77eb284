package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

const schemaJSON = `{"format_version":"1.0","provider_schemas":{"registry.terraform.io/hashicorp/demo":{
 "provider":{"version":0,"block":{"attributes":{"region":{"type":"string","optional":true}}}},
 "resource_schemas":{"demo_thing":{"version":1,"block":{
  "attributes":{
   "id":{"type":"string","computed":true},
   "name":{"type":"string","required":true},
   "arn":{"type":"string","optional":true,"computed":true},
   "tags":{"type":["map","string"],"optional":true},
   "ports":{"type":["list","number"],"optional":true},
   "opts":{"type":["object",{"a":"bool","b":["set","string"]}],"optional":true},
   "pair":{"type":["tuple",["string","number"]],"optional":true},
   "any":{"type":"dynamic","optional":true},
   "settings":{"nested_type":{"nesting_mode":"list","attributes":{"key":{"type":"string","required":true},"etag":{"type":"string","computed":true}}},"optional":true}
  },
  "block_types":{
   "rule":{"nesting_mode":"list","block":{"attributes":{"verb":{"type":"string","required":true},"hash":{"type":"string","computed":true}}}},
   "meta":{"nesting_mode":"single","block":{"attributes":{"uid":{"type":"string","computed":true}}}}
  }}}},
 "data_source_schemas":{"demo_info":{"version":0,"block":{"attributes":{"value":{"type":"string","computed":true}}}}}
}}}`

func gz(s string) *bytes.Buffer {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return &b
}

func TestLoadConvertsTheSchema(t *testing.T) {
	rec, err := load(gz(schemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	if rec.address != "registry.terraform.io/hashicorp/demo" || len(rec.resources) != 1 || len(rec.dataSources) != 1 {
		t.Fatalf("loaded %+v", rec)
	}
	thing := rec.resources["demo_thing"]
	want := tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"id": tftypes.String, "name": tftypes.String, "arn": tftypes.String,
		"tags":     tftypes.Map{ElementType: tftypes.String},
		"ports":    tftypes.List{ElementType: tftypes.Number},
		"opts":     tftypes.Object{AttributeTypes: map[string]tftypes.Type{"a": tftypes.Bool, "b": tftypes.Set{ElementType: tftypes.String}}},
		"pair":     tftypes.Tuple{ElementTypes: []tftypes.Type{tftypes.String, tftypes.Number}},
		"any":      tftypes.DynamicPseudoType,
		"settings": tftypes.List{ElementType: tftypes.Object{AttributeTypes: map[string]tftypes.Type{"key": tftypes.String, "etag": tftypes.String}}},
		"rule":     tftypes.List{ElementType: tftypes.Object{AttributeTypes: map[string]tftypes.Type{"verb": tftypes.String, "hash": tftypes.String}}},
		"meta":     tftypes.Object{AttributeTypes: map[string]tftypes.Type{"uid": tftypes.String}},
	}}
	if got := thing.ValueType(); !got.Equal(want) {
		t.Errorf("value type\n%s\nwant\n%s", got, want)
	}
	if thing.Version != 1 || thing.Block.Attributes[0].Name != "any" || !rec.resources["demo_thing"].Block.Attributes[1].Computed {
		t.Errorf("attributes are sorted, with their flags: %+v", thing.Block.Attributes[:2])
	}
}

// An object type's optional attributes are carried over.
func TestObjectTypeWithOptionalAttributes(t *testing.T) {
	got, err := ctyType([]byte(`["object",{"a":"bool","b":["set","string"]},["b"]]`))
	want := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"a": tftypes.Bool, "b": tftypes.Set{ElementType: tftypes.String}},
		OptionalAttributes: map[string]struct{}{"b": {}}}
	if err != nil || !got.Equal(want) {
		t.Errorf("got %v (%v), want %v", got, err, want)
	}
}

func TestLoadRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"provider_schemas":{}}`, "schema: 0 providers, want 1"},
		{`{"provider_schemas":{"p":{"resource_schemas":{"r":{"block":{"attributes":{"x":{"type":"strng"}}}}}}}}`, `resource r: attribute x: unknown type "strng"`},
		{`{"provider_schemas":{"p":{"resource_schemas":{"r":{"block":{"block_types":{"b":{"nesting_mode":"bag"}}}}}}}}`, `resource r: block b: unknown block nesting "bag"`},
		{`{"provider_schemas":{"p":{"data_source_schemas":{"d":{"block":{"attributes":{"x":{}}}}}}}}`, `data source d: attribute x: neither type nor nested_type`},
	} {
		if _, err := load(gz(tc.doc)); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// Computed attributes the configuration leaves null are planned unknown,
// in nested blocks and nested attributes too; set ones and everything
// else keep the proposed value.
func TestPlanMarksUnsetComputedAttributesUnknown(t *testing.T) {
	rec, err := load(gz(schemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{schema: rec}
	typ := rec.resources["demo_thing"].ValueType().(tftypes.Object)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	null := func(t tftypes.Type) tftypes.Value { return tftypes.NewValue(t, nil) }
	ruleType := typ.AttributeTypes["rule"].(tftypes.List).ElementType
	settingType := typ.AttributeTypes["settings"].(tftypes.List).ElementType
	metaType := typ.AttributeTypes["meta"]
	obj := func(arn tftypes.Value) tftypes.Value {
		vals := map[string]tftypes.Value{}
		for name, at := range typ.AttributeTypes {
			vals[name] = null(at)
		}
		vals["name"], vals["arn"] = str("x"), arn
		vals["rule"] = tftypes.NewValue(typ.AttributeTypes["rule"], []tftypes.Value{
			tftypes.NewValue(ruleType, map[string]tftypes.Value{"verb": str("get"), "hash": null(tftypes.String)})})
		vals["settings"] = tftypes.NewValue(typ.AttributeTypes["settings"], []tftypes.Value{
			tftypes.NewValue(settingType, map[string]tftypes.Value{"key": str("k"), "etag": null(tftypes.String)})})
		vals["meta"] = tftypes.NewValue(metaType, map[string]tftypes.Value{"uid": null(tftypes.String)})
		return tftypes.NewValue(typ, vals)
	}
	dv := func(v tftypes.Value) *tfprotov6.DynamicValue {
		d, err := tfprotov6.NewDynamicValue(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return &d
	}
	for _, arn := range []tftypes.Value{null(tftypes.String), str("arn:given")} {
		resp, err := s.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{
			TypeName: "demo_thing", Config: dv(obj(arn)), ProposedNewState: dv(obj(arn)), PriorState: dv(null(typ))})
		if err != nil || len(resp.Diagnostics) > 0 {
			t.Fatalf("plan: %v %v", err, resp.Diagnostics)
		}
		planned, err := resp.PlannedState.Unmarshal(typ)
		if err != nil {
			t.Fatal(err)
		}
		for path, unknown := range map[string]bool{
			"id": true, "arn": arn.IsNull(), "name": false, "tags": false,
			"rule[0].hash": true, "rule[0].verb": false, "settings[0].etag": true, "settings[0].key": false, "meta.uid": true,
		} {
			v := at(t, planned, path)
			if v.IsKnown() == unknown {
				t.Errorf("arn %v: %s known %v, want unknown %v", arn, path, v.IsKnown(), unknown)
			}
		}
	}
	resp, _ := s.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{TypeName: "demo_nothing"})
	if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Summary != `no resource type "demo_nothing" in the schema` {
		t.Errorf("unknown type: %+v", resp.Diagnostics)
	}
}

// at walks a path written as a.b[0].c.
func at(t *testing.T, v tftypes.Value, path string) tftypes.Value {
	t.Helper()
	p := tftypes.NewAttributePath()
	for _, part := range strings.Split(path, ".") {
		name, index, _ := strings.Cut(part, "[")
		p = p.WithAttributeName(name)
		if index != "" {
			p = p.WithElementKeyInt(int(index[0] - '0'))
		}
	}
	got, _, err := tftypes.WalkAttributePath(v, p)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return got.(tftypes.Value)
}

// The provider changes nothing: apply and reads are refused.
func TestApplyAndReadsAreRefused(t *testing.T) {
	rec, err := load(gz(schemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{schema: rec}
	apply, _ := s.ApplyResourceChange(context.Background(), &tfprotov6.ApplyResourceChangeRequest{TypeName: "demo_thing"})
	read, _ := s.ReadDataSource(context.Background(), &tfprotov6.ReadDataSourceRequest{TypeName: "demo_info"})
	if len(apply.Diagnostics) != 1 || apply.Diagnostics[0].Summary != "cannot apply demo_thing" ||
		len(read.Diagnostics) != 1 || read.Diagnostics[0].Summary != "cannot read data source demo_info (mock it in tests)" {
		t.Errorf("apply %+v, read %+v", apply.Diagnostics, read.Diagnostics)
	}
}
