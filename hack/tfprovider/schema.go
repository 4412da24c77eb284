package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// recorded is one provider's schema as `terraform providers schema -json`
// prints it, in the plugin protocol's types.
type recorded struct {
	address     string // registry.terraform.io/hashicorp/aws
	provider    *tfprotov6.Schema
	resources   map[string]*tfprotov6.Schema
	dataSources map[string]*tfprotov6.Schema
}

type jsonSchemas struct {
	FormatVersion   string                        `json:"format_version"`
	ProviderSchemas map[string]jsonProviderSchema `json:"provider_schemas"`
}

type jsonProviderSchema struct {
	Provider          *jsonSchema            `json:"provider"`
	ResourceSchemas   map[string]*jsonSchema `json:"resource_schemas"`
	DataSourceSchemas map[string]*jsonSchema `json:"data_source_schemas"`
}

type jsonSchema struct {
	Version int64      `json:"version"`
	Block   *jsonBlock `json:"block"`
}

type jsonBlock struct {
	Attributes      map[string]*jsonAttribute `json:"attributes"`
	BlockTypes      map[string]*jsonBlockType `json:"block_types"`
	Description     string                    `json:"description"`
	DescriptionKind string                    `json:"description_kind"`
	Deprecated      bool                      `json:"deprecated"`
}

type jsonAttribute struct {
	Type        json.RawMessage `json:"type"`
	NestedType  *jsonNestedType `json:"nested_type"`
	Description string          `json:"description"`
	Required    bool            `json:"required"`
	Optional    bool            `json:"optional"`
	Computed    bool            `json:"computed"`
	Sensitive   bool            `json:"sensitive"`
	Deprecated  bool            `json:"deprecated"`
	WriteOnly   bool            `json:"write_only"`
}

type jsonNestedType struct {
	Attributes  map[string]*jsonAttribute `json:"attributes"`
	NestingMode string                    `json:"nesting_mode"`
}

type jsonBlockType struct {
	NestingMode string     `json:"nesting_mode"`
	Block       *jsonBlock `json:"block"`
	MinItems    int64      `json:"min_items"`
	MaxItems    int64      `json:"max_items"`
}

// load reads a gzipped schema file holding exactly one provider.
func load(r io.Reader) (*recorded, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	var file jsonSchemas
	if err := json.NewDecoder(zr).Decode(&file); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if len(file.ProviderSchemas) != 1 {
		return nil, fmt.Errorf("schema: %d providers, want 1", len(file.ProviderSchemas))
	}
	for address, p := range file.ProviderSchemas {
		rec := &recorded{address: address, resources: map[string]*tfprotov6.Schema{}, dataSources: map[string]*tfprotov6.Schema{}}
		if rec.provider, err = convertSchema(p.Provider); err != nil {
			return nil, fmt.Errorf("provider: %w", err)
		}
		for kind, set := range map[string]struct {
			from map[string]*jsonSchema
			to   map[string]*tfprotov6.Schema
		}{"resource": {p.ResourceSchemas, rec.resources}, "data source": {p.DataSourceSchemas, rec.dataSources}} {
			for name, s := range set.from {
				if set.to[name], err = convertSchema(s); err != nil {
					return nil, fmt.Errorf("%s %s: %w", kind, name, err)
				}
			}
		}
		return rec, nil
	}
	panic("unreachable")
}

func convertSchema(s *jsonSchema) (*tfprotov6.Schema, error) {
	if s == nil || s.Block == nil {
		return &tfprotov6.Schema{Block: &tfprotov6.SchemaBlock{}}, nil
	}
	b, err := convertBlock(s.Block)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.Schema{Version: s.Version, Block: b}, nil
}

func convertBlock(j *jsonBlock) (*tfprotov6.SchemaBlock, error) {
	b := &tfprotov6.SchemaBlock{Description: j.Description, DescriptionKind: kind(j.DescriptionKind), Deprecated: j.Deprecated}
	var err error
	if b.Attributes, err = convertAttributes(j.Attributes); err != nil {
		return nil, err
	}
	for _, name := range sorted(j.BlockTypes) {
		bt := j.BlockTypes[name]
		nb := &tfprotov6.SchemaNestedBlock{TypeName: name, MinItems: bt.MinItems, MaxItems: bt.MaxItems}
		if nb.Nesting, err = blockNesting(bt.NestingMode); err != nil {
			return nil, fmt.Errorf("block %s: %w", name, err)
		}
		inner := bt.Block
		if inner == nil {
			inner = &jsonBlock{}
		}
		if nb.Block, err = convertBlock(inner); err != nil {
			return nil, fmt.Errorf("block %s: %w", name, err)
		}
		b.BlockTypes = append(b.BlockTypes, nb)
	}
	return b, nil
}

func convertAttributes(attrs map[string]*jsonAttribute) ([]*tfprotov6.SchemaAttribute, error) {
	var out []*tfprotov6.SchemaAttribute
	for _, name := range sorted(attrs) {
		a := attrs[name]
		sa := &tfprotov6.SchemaAttribute{Name: name, Description: a.Description, Required: a.Required, Optional: a.Optional,
			Computed: a.Computed, Sensitive: a.Sensitive, Deprecated: a.Deprecated, WriteOnly: a.WriteOnly}
		switch {
		case a.NestedType != nil:
			nested := &tfprotov6.SchemaObject{}
			var err error
			if nested.Attributes, err = convertAttributes(a.NestedType.Attributes); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", name, err)
			}
			if nested.Nesting, err = objectNesting(a.NestedType.NestingMode); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", name, err)
			}
			sa.NestedType = nested
		case len(a.Type) > 0:
			t, err := ctyType(a.Type)
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", name, err)
			}
			sa.Type = t
		default:
			return nil, fmt.Errorf("attribute %s: neither type nor nested_type", name)
		}
		out = append(out, sa)
	}
	return out, nil
}

// ctyType reads a type in cty's JSON form: "string", ["list", T],
// ["object", {attr: T}, [optional attrs]], ["tuple", [T…]].
func ctyType(raw json.RawMessage) (tftypes.Type, error) {
	var primitive string
	if json.Unmarshal(raw, &primitive) == nil {
		switch primitive {
		case "string":
			return tftypes.String, nil
		case "number":
			return tftypes.Number, nil
		case "bool":
			return tftypes.Bool, nil
		case "dynamic":
			return tftypes.DynamicPseudoType, nil
		}
		return nil, fmt.Errorf("unknown type %q", primitive)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) < 2 {
		return nil, fmt.Errorf("unreadable type %s", raw)
	}
	var kind string
	if err := json.Unmarshal(parts[0], &kind); err != nil {
		return nil, fmt.Errorf("unreadable type %s", raw)
	}
	switch kind {
	case "list", "set", "map":
		elem, err := ctyType(parts[1])
		if err != nil {
			return nil, err
		}
		switch kind {
		case "list":
			return tftypes.List{ElementType: elem}, nil
		case "set":
			return tftypes.Set{ElementType: elem}, nil
		}
		return tftypes.Map{ElementType: elem}, nil
	case "object":
		var attrs map[string]json.RawMessage
		if err := json.Unmarshal(parts[1], &attrs); err != nil {
			return nil, fmt.Errorf("unreadable object type %s", raw)
		}
		obj := tftypes.Object{AttributeTypes: map[string]tftypes.Type{}}
		for name, at := range attrs {
			t, err := ctyType(at)
			if err != nil {
				return nil, err
			}
			obj.AttributeTypes[name] = t
		}
		if len(parts) > 2 {
			// tftypes builds no value of such an object (it panics), so a
			// plan of a resource holding one would fail; no recorded
			// schema has one.
			var optional []string
			if err := json.Unmarshal(parts[2], &optional); err != nil {
				return nil, fmt.Errorf("unreadable optional attributes %s", raw)
			}
			obj.OptionalAttributes = map[string]struct{}{}
			for _, o := range optional {
				obj.OptionalAttributes[o] = struct{}{}
			}
		}
		return obj, nil
	case "tuple":
		var elems []json.RawMessage
		if err := json.Unmarshal(parts[1], &elems); err != nil {
			return nil, fmt.Errorf("unreadable tuple type %s", raw)
		}
		tuple := tftypes.Tuple{}
		for _, e := range elems {
			t, err := ctyType(e)
			if err != nil {
				return nil, err
			}
			tuple.ElementTypes = append(tuple.ElementTypes, t)
		}
		return tuple, nil
	}
	return nil, fmt.Errorf("unknown type %s", raw)
}

func blockNesting(mode string) (tfprotov6.SchemaNestedBlockNestingMode, error) {
	switch mode {
	case "single":
		return tfprotov6.SchemaNestedBlockNestingModeSingle, nil
	case "list":
		return tfprotov6.SchemaNestedBlockNestingModeList, nil
	case "set":
		return tfprotov6.SchemaNestedBlockNestingModeSet, nil
	case "map":
		return tfprotov6.SchemaNestedBlockNestingModeMap, nil
	case "group":
		return tfprotov6.SchemaNestedBlockNestingModeGroup, nil
	}
	return 0, fmt.Errorf("unknown block nesting %q", mode)
}

func objectNesting(mode string) (tfprotov6.SchemaObjectNestingMode, error) {
	switch mode {
	case "single":
		return tfprotov6.SchemaObjectNestingModeSingle, nil
	case "list":
		return tfprotov6.SchemaObjectNestingModeList, nil
	case "set":
		return tfprotov6.SchemaObjectNestingModeSet, nil
	case "map":
		return tfprotov6.SchemaObjectNestingModeMap, nil
	}
	return 0, fmt.Errorf("unknown attribute nesting %q", mode)
}

func kind(k string) tfprotov6.StringKind {
	if k == "markdown" {
		return tfprotov6.StringKindMarkdown
	}
	return tfprotov6.StringKindPlain
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
