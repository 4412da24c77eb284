// Package envvar reads the ADMITFN_* settings every entry point and the
// CLI share, so that one value means one thing everywhere.
package envvar

import "fmt"

// Bool reads the true/false variable name whose value is v: "" and "false"
// are false, "true" is true, anything else is an error that names it.
func Bool(name, v string) (bool, error) {
	switch v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: want true or false", name, v)
}
