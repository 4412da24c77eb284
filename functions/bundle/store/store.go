// Package store reads and writes the objects of a policy bundle where it
// lives: a local directory, or a prefix of an S3 or GCS bucket. Backends
// implement Bucket; Open picks one from a location such as s3://bucket/prefix.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/admitfn/admitfn/functions/internal/envvar"
)

// S3PathStyle reads ADMITFN_S3_PATH_STYLE, for S3-compatible servers that
// need path-style requests. It is here, not in s3store, so that every entry
// point reads the setting alike without linking the S3 SDK.
func S3PathStyle(getenv func(string) string) (bool, error) {
	return envvar.Bool("ADMITFN_S3_PATH_STYLE", getenv("ADMITFN_S3_PATH_STYLE"))
}

// Errors a Bucket returns, matched with errors.Is.
var (
	// ErrNotFound: no object has the key (or no longer has the version).
	ErrNotFound = errors.New("object not found")
	// ErrNotModified: the object still has the ETag the caller had.
	ErrNotModified = errors.New("object not modified")
	// ErrNoBucket: the location's bucket does not exist.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrNotBuiltIn: the binary has no backend for the location's scheme.
	ErrNotBuiltIn = errors.New("storage backend not built in")
	// ErrConflict: a conditional write found the object changed (or, for
	// a create, present) since the caller read it, and wrote nothing.
	ErrConflict = errors.New("object changed since it was read")
)

// Object describes one stored object.
type Object struct {
	// Key is relative to the bucket's prefix, slash-separated.
	Key  string
	Size int64
	// ETag changes whenever the object does: S3's ETag, GCS's generation, a
	// directory's size and modification time.
	ETag string
	// Version names this exact content where the store keeps versions (an S3
	// version id on a versioned bucket, a GCS generation); "" elsewhere.
	Version string
}

// Bucket is a place holding bundle objects under one prefix.
type Bucket interface {
	// Get reads the current object at key. With ifNoneMatch set to an ETag
	// from an earlier Get, it returns ErrNotModified while the object keeps
	// that ETag, without reading it.
	Get(ctx context.Context, key, ifNoneMatch string) ([]byte, Object, error)
	// GetVersion reads version of key, or its current content when version
	// is "". A version that no longer exists is ErrNotFound.
	GetVersion(ctx context.Context, key, version string) ([]byte, error)
	// List returns every object under the prefix, in key order.
	List(ctx context.Context) ([]Object, error)
	// Put writes data at key and returns what was written.
	Put(ctx context.Context, key string, data []byte, contentType string) (Object, error)
	// PutIf writes data at key only while the object there still has the
	// ETag ifMatch, or, with ifMatch "", while there is none; otherwise it
	// writes nothing and returns ErrConflict. It is the store's own
	// precondition (S3 If-Match and If-None-Match, a GCS generation
	// match), so of two writers that read the same ETag one wins.
	PutIf(ctx context.Context, key string, data []byte, contentType, ifMatch string) (Object, error)
	// Location is where the bucket points, as Open accepts it.
	Location() string
}

// Remover is a Bucket a publisher may delete from: a push removes the
// objects of the bundle it replaces that the new one no longer names.
type Remover interface {
	// Remove deletes the object at key (its current version, where the
	// store keeps versions: older ones stay readable by version).
	Remove(ctx context.Context, key string) error
}

// Location is a parsed bundle location.
type Location struct {
	// Scheme is "s3", "gs", or "" for a local directory.
	Scheme string
	// Bucket is the bucket name; for a directory, its path.
	Bucket string
	// Prefix is the key prefix inside the bucket, without slashes at either
	// end ("" for the whole bucket).
	Prefix string
}

// Remote reports whether the location is an object store.
func (l Location) Remote() bool { return l.Scheme != "" }

func (l Location) String() string {
	if !l.Remote() {
		return l.Bucket
	}
	s := l.Scheme + "://" + l.Bucket
	if l.Prefix != "" {
		s += "/" + l.Prefix
	}
	return s
}

// Key joins the prefix and a bundle-relative key.
func (l Location) Key(rel string) string {
	if l.Prefix == "" {
		return rel
	}
	return l.Prefix + "/" + rel
}

// Rel is the bundle-relative key of a full key under the prefix, and
// whether it is under the prefix at all.
func (l Location) Rel(key string) (string, bool) {
	if l.Prefix == "" {
		return key, key != ""
	}
	rel, ok := strings.CutPrefix(key, l.Prefix+"/")
	return rel, ok && rel != ""
}

// ParseLocation reads a bundle location: s3://bucket[/prefix],
// gs://bucket[/prefix], or a directory path.
func ParseLocation(s string) (Location, error) {
	if s == "" {
		return Location{}, errors.New("empty policy location: want a directory, s3://bucket/prefix or gs://bucket/prefix")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Location{Bucket: s}, nil
	}
	switch scheme {
	case "s3", "gs":
	default:
		return Location{}, fmt.Errorf("policy location %q: unsupported scheme %q: want a directory, s3://bucket/prefix or gs://bucket/prefix", s, scheme)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("policy location %q: no bucket name", s)
	}
	if strings.ContainsAny(bucket, "?#") || strings.ContainsAny(prefix, "?#") {
		return Location{}, fmt.Errorf("policy location %q: query strings and fragments are not part of a location", s)
	}
	if u, err := url.PathUnescape(prefix); err != nil || u != prefix {
		return Location{}, fmt.Errorf("policy location %q: escaped characters in the prefix are not supported", s)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" && path.Clean(prefix) != prefix {
		return Location{}, fmt.Errorf("policy location %q: the prefix %q is not a clean path", s, prefix)
	}
	return Location{Scheme: scheme, Bucket: bucket, Prefix: prefix}, nil
}

// ValidKey reports whether rel may name a bundle object: a clean, relative,
// slash-separated path that stays under the prefix.
func ValidKey(rel string) bool {
	return rel != "" && !strings.HasPrefix(rel, "/") && path.Clean(rel) == rel && rel != ".." && !strings.HasPrefix(rel, "../") && !strings.Contains(rel, "\\")
}

// MaxObjectBytes bounds what a backend reads for one object: a policy file or
// manifest larger than this is refused rather than read into memory.
const MaxObjectBytes = 32 << 20

// ErrTooLarge: an object is over MaxObjectBytes.
var ErrTooLarge = fmt.Errorf("object larger than %d bytes", MaxObjectBytes)
