//go:build tools

// Package tools pins terraform-docs, which writes the input and output
// tables of the Terraform modules' READMEs.
package tools

import _ "github.com/terraform-docs/terraform-docs"
