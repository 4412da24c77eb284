// Package logging reads the log level setting every entry point shares.
package logging

import (
	"fmt"

	"github.com/rs/zerolog"
)

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
