package main

import (
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// planUnknown is the proposed state with every computed attribute the
// configuration leaves null planned as unknown, as a provider that
// computes it on apply plans it. Inside sets, whose elements are their
// values, nothing changes.
func planUnknown(block *tfprotov6.SchemaBlock, proposed, config tftypes.Value) (tftypes.Value, error) {
	if proposed.IsNull() { // a destroy
		return proposed, nil
	}
	return tftypes.Transform(proposed, func(path *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if !v.IsNull() {
			return v, nil
		}
		for _, step := range path.Steps() {
			if _, inSet := step.(tftypes.ElementKeyValue); inSet {
				return v, nil
			}
		}
		attr := attributeAt(block, path)
		if attr == nil || !attr.Computed {
			return v, nil
		}
		if c, _, err := tftypes.WalkAttributePath(config, path); err == nil {
			if cv, ok := c.(tftypes.Value); ok && !cv.IsNull() {
				return v, nil
			}
		}
		return tftypes.NewValue(v.Type(), tftypes.UnknownValue), nil
	})
}

// attributeAt is the schema attribute path names, or nil when it names a
// block, an element, or something inside an attribute's value.
func attributeAt(root *tfprotov6.SchemaBlock, path *tftypes.AttributePath) *tfprotov6.SchemaAttribute {
	block := root
	var (
		attrs   []*tfprotov6.SchemaAttribute // a nested attribute's object, when inside one
		found   *tfprotov6.SchemaAttribute
		element bool // the next step picks an element of a collection
	)
	for _, step := range path.Steps() {
		if element {
			if _, ok := step.(tftypes.AttributeName); ok {
				return nil
			}
			element, found = false, nil
			continue
		}
		name, ok := step.(tftypes.AttributeName)
		if !ok || (block == nil && attrs == nil) {
			return nil // inside a plain attribute's value
		}
		found = nil
		candidates := attrs
		if block != nil {
			candidates = block.Attributes
		}
		for _, a := range candidates {
			if a.Name == string(name) {
				found = a
			}
		}
		switch {
		case found != nil && found.NestedType != nil:
			block, attrs = nil, found.NestedType.Attributes
			element = found.NestedType.Nesting != tfprotov6.SchemaObjectNestingModeSingle
		case found != nil:
			block, attrs = nil, nil
		case block != nil:
			var next *tfprotov6.SchemaNestedBlock
			for _, nb := range block.BlockTypes {
				if nb.TypeName == string(name) {
					next = nb
				}
			}
			if next == nil {
				return nil
			}
			block = next.Block
			element = next.Nesting != tfprotov6.SchemaNestedBlockNestingModeSingle && next.Nesting != tfprotov6.SchemaNestedBlockNestingModeGroup
		default:
			return nil
		}
	}
	if element {
		return nil
	}
	return found
}
