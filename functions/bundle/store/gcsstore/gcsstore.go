// Package gcsstore is the Google Cloud Storage backend of store.Bucket,
// through cloud.google.com/go/storage: Application Default Credentials (a
// function's service account just works), and STORAGE_EMULATOR_HOST for
// emulators, which the client library honours itself.
package gcsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

// Bucket is a prefix of a GCS bucket. Every object has a generation, so
// reads can always be pinned to the content a manifest names.
type Bucket struct {
	client *storage.Client
	loc    store.Location
}

var (
	_ store.Bucket  = (*Bucket)(nil)
	_ store.Remover = (*Bucket)(nil)
)

// Open returns the bucket of loc (scheme gs) with a client from Application
// Default Credentials.
func Open(ctx context.Context, loc store.Location) (*Bucket, error) {
	client, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("google cloud storage client: %w", err)
	}
	return New(client, loc), nil
}

// New returns the bucket of loc served by client.
func New(client *storage.Client, loc store.Location) *Bucket {
	return &Bucket{client: client, loc: loc}
}

func (b *Bucket) Location() string { return b.loc.String() }

func (b *Bucket) object(key string) *storage.ObjectHandle {
	return b.client.Bucket(b.loc.Bucket).Object(b.loc.Key(key))
}

// Get reads the object's attributes first: an unchanged generation is
// answered without reading the content, and a changed one is read pinned
// to the generation seen, so data and ETag always agree.
func (b *Bucket) Get(ctx context.Context, key, ifNoneMatch string) ([]byte, store.Object, error) {
	attrs, err := b.object(key).Attrs(ctx)
	if err != nil {
		return nil, store.Object{}, b.err(err, key)
	}
	gen := strconv.FormatInt(attrs.Generation, 10)
	obj := store.Object{Key: key, Size: attrs.Size, ETag: gen, Version: gen}
	if ifNoneMatch != "" && ifNoneMatch == gen {
		return nil, obj, store.ErrNotModified
	}
	data, err := b.read(ctx, key, attrs.Generation)
	if err != nil {
		return nil, store.Object{}, err
	}
	obj.Size = int64(len(data))
	return data, obj, nil
}

func (b *Bucket) GetVersion(ctx context.Context, key, version string) ([]byte, error) {
	gen := int64(-1)
	if version != "" {
		g, err := strconv.ParseInt(version, 10, 64)
		if err != nil || g <= 0 {
			return nil, fmt.Errorf("%s/%s: invalid generation %q", b.loc, key, version)
		}
		gen = g
	}
	return b.read(ctx, key, gen)
}

func (b *Bucket) read(ctx context.Context, key string, gen int64) ([]byte, error) {
	o := b.object(key)
	if gen > 0 {
		o = o.Generation(gen)
	}
	r, err := o.NewReader(ctx)
	if err != nil {
		return nil, b.err(err, key)
	}
	defer r.Close()
	return store.ReadAll(key, r)
}

func (b *Bucket) List(ctx context.Context) ([]store.Object, error) {
	q := &storage.Query{}
	if b.loc.Prefix != "" {
		q.Prefix = b.loc.Prefix + "/"
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation"}); err != nil {
		return nil, err
	}
	var objs []store.Object
	it := b.client.Bucket(b.loc.Bucket).Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, b.err(err, "")
		}
		rel, ok := b.loc.Rel(attrs.Name)
		if !ok || strings.HasSuffix(rel, "/") {
			continue
		}
		gen := strconv.FormatInt(attrs.Generation, 10)
		objs = append(objs, store.Object{Key: rel, Size: attrs.Size, ETag: gen, Version: gen})
	}
	return objs, nil
}

func (b *Bucket) Put(ctx context.Context, key string, data []byte, contentType string) (store.Object, error) {
	return b.put(ctx, b.object(key), key, data, contentType)
}

// PutIf is a GCS generation precondition: the generation read (the ETag
// Get returns), or generation 0 for an object that must not exist yet.
func (b *Bucket) PutIf(ctx context.Context, key string, data []byte, contentType, ifMatch string) (store.Object, error) {
	cond := storage.Conditions{DoesNotExist: true}
	if ifMatch != "" {
		gen, err := strconv.ParseInt(ifMatch, 10, 64)
		if err != nil || gen <= 0 {
			return store.Object{}, fmt.Errorf("%s/%s: invalid generation %q", b.loc, key, ifMatch)
		}
		cond = storage.Conditions{GenerationMatch: gen}
	}
	return b.put(ctx, b.object(key).If(cond), key, data, contentType)
}

func (b *Bucket) put(ctx context.Context, o *storage.ObjectHandle, key string, data []byte, contentType string) (store.Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an unfinished writer is abandoned by cancelling its context
	w := o.NewWriter(ctx)
	w.ContentType = contentType
	w.ChunkSize = 0 // one request: bundle objects are small
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		return store.Object{}, b.err(err, key)
	}
	if err := w.Close(); err != nil {
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == http.StatusNotFound {
			// A new object cannot be missing: its bucket is.
			return store.Object{}, fmt.Errorf("%s: %w", b.loc.String(), store.ErrNoBucket)
		}
		if errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed {
			return store.Object{}, fmt.Errorf("%s/%s: %w", b.loc, key, store.ErrConflict)
		}
		return store.Object{}, b.err(err, key)
	}
	gen := strconv.FormatInt(w.Attrs().Generation, 10)
	return store.Object{Key: key, Size: int64(len(data)), ETag: gen, Version: gen}, nil
}

// Remove deletes key's live generation; with object versioning on, it
// stays readable by generation.
func (b *Bucket) Remove(ctx context.Context, key string) error {
	if err := b.object(key).Delete(ctx); err != nil {
		return b.err(err, key)
	}
	return nil
}

func (b *Bucket) err(err error, key string) error {
	where := b.loc.String()
	if key != "" {
		where += "/" + key
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("%s: %w", b.loc.String(), store.ErrNoBucket)
	}
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("%s: %w", where, store.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", where, err)
}
