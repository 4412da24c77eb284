// Package syncbuf is a bytes.Buffer safe for concurrent writers, for tests
// that collect a process's or a server's log lines while it runs.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects writes from any goroutine.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
