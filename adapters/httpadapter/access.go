package httpadapter

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/admitfn/admitfn/adapters/metrics"
)

// MinTokenLength is the shortest path token accepted: 22 base64url
// characters carry 132 bits.
const MinTokenLength = 22

// Option configures a Handler.
type Option func(*Handler)

// WithPathTokens puts the review routes under a secret first path segment,
// /<token>/validate/…: the only protection a public Function URL can have,
// since kube-apiserver cannot authenticate to a webhook on a managed
// control plane. Several tokens are accepted at once, for rotation. A
// request without a valid token gets a bare 404.
func WithPathTokens(tokens ...string) Option {
	return func(h *Handler) {
		for _, t := range tokens {
			h.tokens = append(h.tokens, []byte(t))
		}
	}
}

// WithAuthenticator makes every review request pass auth (a bearer token,
// basic credentials: what kube-apiserver sends when its admission
// kubeconfig names a user for the webhook), else 401.
func WithAuthenticator(auth Authenticator) Option {
	return func(h *Handler) { h.auth = auth }
}

// WithMetrics records every review and every refused request.
func WithMetrics(rec metrics.Recorder) Option {
	return func(h *Handler) { h.metrics = rec }
}

// WithMetricsHandler serves GET /metrics (under the path token, when there
// is one: metrics name the bundle's routes and decisions).
func WithMetricsHandler(m http.Handler) Option {
	return func(h *Handler) { h.metricsHandler = m }
}

// ParseTokens reads ADMITFN_TOKENS: comma-separated path tokens, each at
// least MinTokenLength characters of the base64url alphabet.
func ParseTokens(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if len(t) < MinTokenLength || strings.Trim(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return nil, fmt.Errorf("path token %d: want at least %d characters of A-Z, a-z, 0-9, - and _ (128 bits or more; `admitfn token` makes one)", len(out)+1, MinTokenLength)
		}
		out = append(out, t)
	}
	return out, nil
}

// stripToken removes a valid token segment from path. It compares against
// every configured token in constant time, so timing tells nothing of how
// much of a guess was right.
func (h *Handler) stripToken(path string) (string, bool) {
	if len(h.tokens) == 0 {
		return path, true
	}
	seg, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	ok := 0
	for _, t := range h.tokens {
		ok |= subtle.ConstantTimeCompare([]byte(seg), t)
	}
	if ok != 1 {
		return "", false
	}
	return "/" + rest, true
}

// Authenticator checks a request's credentials.
type Authenticator interface {
	Authenticate(r *http.Request) bool
	// Challenge is the WWW-Authenticate value of a 401.
	Challenge() string
}

// BearerTokens accepts `Authorization: Bearer <token>` with one of its
// tokens.
type BearerTokens struct{ digests [][32]byte }

// NewBearerTokens returns an Authenticator for tokens (none may be empty).
func NewBearerTokens(tokens []string) (*BearerTokens, error) {
	b := &BearerTokens{}
	for i, t := range tokens {
		if t == "" {
			return nil, fmt.Errorf("bearer token %d is empty", i+1)
		}
		b.digests = append(b.digests, sha256.Sum256([]byte(t)))
	}
	if len(b.digests) == 0 {
		return nil, errors.New("no bearer tokens")
	}
	return b, nil
}

func (b *BearerTokens) Authenticate(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return matchDigest(b.digests, sha256.Sum256([]byte(token)))
}

func (b *BearerTokens) Challenge() string { return `Bearer realm="admitfn"` }

// BasicUsers accepts HTTP basic authentication by one of its users.
type BasicUsers struct{ digests [][32]byte }

// NewBasicUsers returns an Authenticator for users (name → password).
func NewBasicUsers(users map[string]string) (*BasicUsers, error) {
	b := &BasicUsers{}
	for name, pw := range users {
		if name == "" || pw == "" || strings.Contains(name, ":") {
			return nil, fmt.Errorf("basic user %q: want a name without ':' and a password", name)
		}
		b.digests = append(b.digests, sha256.Sum256([]byte(name+":"+pw)))
	}
	if len(b.digests) == 0 {
		return nil, errors.New("no basic users")
	}
	return b, nil
}

func (b *BasicUsers) Authenticate(r *http.Request) bool {
	name, pw, ok := r.BasicAuth()
	if !ok {
		return false
	}
	return matchDigest(b.digests, sha256.Sum256([]byte(name+":"+pw)))
}

func (b *BasicUsers) Challenge() string { return `Basic realm="admitfn"` }

// AnyOf accepts a request any of its authenticators accepts.
type AnyOf []Authenticator

func (a AnyOf) Authenticate(r *http.Request) bool {
	for _, x := range a {
		if x.Authenticate(r) {
			return true
		}
	}
	return false
}

func (a AnyOf) Challenge() string {
	c := make([]string, len(a))
	for i, x := range a {
		c[i] = x.Challenge()
	}
	return strings.Join(c, ", ")
}

// AllOf accepts a request every one of its authenticators accepts: a
// client certificate and a bearer token, say.
type AllOf []Authenticator

func (a AllOf) Authenticate(r *http.Request) bool {
	for _, x := range a {
		if !x.Authenticate(r) {
			return false
		}
	}
	return true
}

func (a AllOf) Challenge() string {
	var c []string
	for _, x := range a {
		if ch := x.Challenge(); ch != "" {
			c = append(c, ch)
		}
	}
	return strings.Join(c, ", ")
}

// ClientCertificates accepts a request over TLS whose client certificate
// the handshake verified (tls.VerifyClientCertIfGiven with the client CAs):
// mTLS checked per route, so that probes need no certificate.
type ClientCertificates struct{}

func (ClientCertificates) Authenticate(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// Challenge is empty: a certificate is asked for in the TLS handshake, not
// by WWW-Authenticate.
func (ClientCertificates) Challenge() string { return "" }

// matchDigest compares digests of equal length in constant time, against
// every candidate.
func matchDigest(candidates [][32]byte, d [32]byte) bool {
	ok := 0
	for _, c := range candidates {
		ok |= subtle.ConstantTimeCompare(c[:], d[:])
	}
	return ok == 1
}
