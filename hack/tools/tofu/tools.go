//go:build tools

// Package tools pins OpenTofu, the Terraform CLI make tf-check runs: the
// Terraform CLI cannot be built from the module proxy (its go.mod replaces
// modules with directories its module zip leaves out), and no Debian
// package carries either.
package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
