// Package logging reads the log level setting every entry point shares, and
// quiets the logging of the libraries admitfn is built on.
package logging

import (
	"fmt"
	"io"

	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// QuietLibraries turns off klog, the Kubernetes libraries' own logging, which
// writes to stderr unless told otherwise. Its lines are not admitfn's JSON,
// and some carry what admitfn never logs: kube-apiserver's policy dispatcher
// warns, with the value, when a second policy's audit failure cannot be
// recorded, and that value holds validation messages, which may quote the
// object under review (a Secret, say). admitfn's own log line for the review
// names the failed policies.
func QuietLibraries() {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

// Level parses a log level name; empty means info.
func Level(name string) (zerolog.Level, error) {
	if name == "" {
		return zerolog.InfoLevel, nil
	}
	l, err := zerolog.ParseLevel(name)
	if err != nil || l == zerolog.NoLevel {
		return zerolog.NoLevel, fmt.Errorf("invalid log level %q: want debug, info, warn or error", name)
	}
	return l, nil
}
