package celeval

import (
	"slices"
	"strings"
)

// Building expressions as text: And, Or and Not fold the constants true
// and false, so a part that rules nothing in or out disappears.

// And is the conjunction of parts.
func And(parts ...string) string { return fold(parts, "true", "false", " && ") }

// Or is the disjunction of parts.
func Or(parts ...string) string { return fold(parts, "false", "true", " || ") }

// fold joins parts with op, dropping identity and duplicates, and is
// absorbing if any part is.
func fold(parts []string, identity, absorbing, op string) string {
	var keep []string
	for _, p := range parts {
		switch p {
		case identity, "":
			continue
		case absorbing:
			return absorbing
		}
		if !slices.Contains(keep, p) {
			keep = append(keep, p)
		}
	}
	switch len(keep) {
	case 0:
		return identity
	case 1:
		return keep[0]
	}
	return "(" + strings.Join(keep, op) + ")"
}

// Not is the negation of p.
func Not(p string) string {
	switch p {
	case "true":
		return "false"
	case "false":
		return "true"
	}
	return "!(" + p + ")"
}

// Embed parenthesizes a whole expression for a larger one. Its parentheses
// balance and it ends outside any literal; only a trailing // comment
// could swallow what follows it, and a newline ends that.
func Embed(expr string) string {
	expr = strings.TrimSpace(expr)
	if expr == "true" || expr == "false" {
		return expr
	}
	if strings.Contains(expr, "//") {
		return "(" + expr + "\n)"
	}
	return "(" + expr + ")"
}
