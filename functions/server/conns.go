package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultMaxConnections caps the server's open connections. kube-apiserver
// keeps a few per instance (HTTP/2 multiplexes its calls), so this is far
// above what a cluster needs; where the process's file-descriptor limit
// leaves less room, the cap is lowered to fit (connCap).
const DefaultMaxConnections = 1000

// minReservedFDs is the least of the descriptor limit kept from
// connections: standard streams, the listener, the poller, the object
// store clients' connections (up to eight reads at once, and their pools),
// and the connection accepted before the cap closes another.
const minReservedFDs = 32

// connCap is the connection cap under a descriptor limit of nofile:
// requested, unless it would leave the process less than minReservedFDs (or
// an eighth of the limit) for everything else, in which case the cap is
// what they leave, with a warning when the cap was asked for. At the cap a
// new connection closes an idle one; above the descriptor limit accept
// would fail instead, and idle connections could keep reviews out. A limit
// too low to leave one connection is an error.
func connCap(requested int, asked bool, nofile uint64) (n int, warning string, err error) {
	if nofile == 0 || nofile > 1<<30 {
		return requested, "", nil
	}
	room := int64(nofile) - max(minReservedFDs, int64(nofile)/8)
	if room < 1 {
		return 0, "", fmt.Errorf("the file-descriptor limit (%d) leaves no room for connections: raise it (ulimit -n) above %d", nofile, minReservedFDs)
	}
	if int64(requested) <= room {
		return requested, "", nil
	}
	if asked {
		warning = fmt.Sprintf("--max-connections %d is more than the file-descriptor limit (%d) leaves for connections: serving at most %d", requested, nofile, room)
	}
	return int(room), warning, nil
}

// fdLimit is the process's file-descriptor limit (Go raises the soft limit
// to the hard one at start); 0 when it cannot be read.
func fdLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}

// idleTimeout closes keep-alive connections unused this long. kube-apiserver
// calls often and re-dials cheaply; an idle connection only holds a slot.
const idleTimeout = 30 * time.Second

// connLimit is a listener that keeps at most max connections open. At the
// cap, a new connection closes the one that has waited longest without a
// request in progress: idle between requests, or not yet past its first
// request's headers. Connections without a valid token or credentials can
// hold no slot a review needs. When every connection is busy, the new one is
// closed: overload, which the webhook's failurePolicy answers.
type connLimit struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    map[*limitedConn]struct{}
	evicted atomic.Int64
	refused atomic.Int64
}

type limitedConn struct {
	net.Conn
	l     *connLimit
	state http.ConnState // guarded by l.mu
	since time.Time      // when state began; guarded by l.mu
	once  sync.Once
}

func limitConns(l net.Listener, max int) *connLimit {
	return &connLimit{Listener: l, max: max, open: map[*limitedConn]struct{}{}}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, state: http.StateNew, since: time.Now()}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.open) >= l.max {
			victim = l.victimLocked()
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				c.Close()
				continue
			}
			delete(l.open, victim)
		}
		l.open[lc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			victim.Conn.Close()
		}
		return lc, nil
	}
}

// victimLocked is the connection waiting longest with no request in
// progress, or nil.
func (l *connLimit) victimLocked() *limitedConn {
	var v *limitedConn
	for c := range l.open {
		if c.state != http.StateIdle && c.state != http.StateNew {
			continue
		}
		if v == nil || c.since.Before(v.since) {
			v = c
		}
	}
	return v
}

// ConnState is the http.Server's hook: it tracks what each connection does.
func (l *connLimit) ConnState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	if s == http.StateClosed || s == http.StateHijacked {
		lc.release()
		return
	}
	l.mu.Lock()
	lc.state, lc.since = s, time.Now()
	l.mu.Unlock()
}

// Open counts the open connections.
func (l *connLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

func (c *limitedConn) release() {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
	})
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
