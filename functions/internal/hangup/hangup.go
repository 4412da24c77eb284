// Package hangup catches SIGHUP as the process starts, before the
// packages a server imports run their init functions (k8s.io's scheme
// registrations are most of a start's work): a SIGHUP's default action
// ends a Go process, and a sidecar that watches a mounted ConfigMap may
// send one at any time. Import it first; the server reads the signals
// from C once it can act on them.
package hangup

import (
	"os"
	"os/signal"
	"syscall"
)

// C receives SIGHUP from the start of the process; one signal is kept
// until it is read, and the ones after it coalesce with it.
var C = make(chan os.Signal, 1)

func init() { signal.Notify(C, syscall.SIGHUP) }
