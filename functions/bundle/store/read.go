package store

import (
	"fmt"
	"io"
)

// ReadAll reads an object's body, up to MaxObjectBytes.
func ReadAll(key string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxObjectBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > MaxObjectBytes {
		return nil, fmt.Errorf("%s: %w", key, ErrTooLarge)
	}
	return data, nil
}
