package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// TokenSource makes the bearer tokens of one cluster: the token and until
// when to use it.
type TokenSource func(ctx context.Context) (string, time.Time, error)

// Authenticators make tokens from the function's own cloud identity; an
// entry point links only its platform's (eksauth, gkeauth), so a
// configuration that names another is refused at start.
type Authenticators struct {
	EKS func(EKS) TokenSource
	GKE func(GKE) TokenSource
}

// Bearer returns a transport wrapper that sets Authorization from src,
// renewed when it expires.
func Bearer(src TokenSource) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &bearer{next: rt, token: src} }
}

// bearer sets Authorization from a token it renews when it expires. A
// token error fails the request with a message that names no credential.
type bearer struct {
	next  http.RoundTripper
	token TokenSource

	mu      sync.Mutex
	current string
	expires time.Time
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	if b.current == "" || !time.Now().Before(b.expires) {
		t, exp, err := b.token(req.Context())
		if err != nil {
			b.mu.Unlock()
			return nil, fmt.Errorf("cannot get a token for the cluster: %w", err)
		}
		b.current, b.expires = t, exp
	}
	t := b.current
	b.mu.Unlock()
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t)
	return b.next.RoundTrip(req)
}
