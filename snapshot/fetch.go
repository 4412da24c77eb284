package snapshot

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/store"
)

// ErrNotModified: the bundle is the one the caller already has.
var ErrNotModified = errors.New("bundle not modified")

// ErrEmpty: the location holds neither a manifest nor any policy file.
var ErrEmpty = errors.New("no bundle: neither a manifest nor any .yaml, .yml or .json file")

// parallelism bounds concurrent object reads and writes.
const parallelism = 8

// Snapshot is a fetched bundle's files and what is known of them.
type Snapshot struct {
	Sources []policy.Source
	// BundleID is policy.ID of the sources.
	BundleID string
	// Manifested is false when the location has no manifest and the
	// objects were read as listed, with no snapshot guarantee.
	Manifested bool
	// Created is the manifest's creation time (zero without one).
	Created time.Time
	// Token identifies what was fetched; passed back to Fetch, it makes
	// the check conditional.
	Token string
}

// Fetcher reads bundles from one location.
type Fetcher struct {
	Bucket store.Bucket
	// Keys, when set, are the public keys one of which must have signed the
	// manifest; unsigned bundles are then refused.
	Keys []ed25519.PublicKey
}

const listToken = "list:"

// Fetch returns the bundle at the location, or ErrNotModified when its
// token is still prev. With a manifest, it reads exactly the objects the
// manifest names (by version where the store keeps them) and verifies each
// one's size and sha256, and the bundle ID, so it returns the whole upload
// the manifest describes or an error. Without one, it reads every policy
// file listed under the prefix.
func (f *Fetcher) Fetch(ctx context.Context, prev string) (*Snapshot, error) {
	ifNoneMatch := prev
	if strings.HasPrefix(prev, listToken) {
		ifNoneMatch = ""
	}
	raw, obj, err := f.Bucket.Get(ctx, ManifestKey, ifNoneMatch)
	switch {
	case errors.Is(err, store.ErrNotModified):
		return nil, ErrNotModified
	case errors.Is(err, store.ErrNotFound):
		return f.fetchListed(ctx, prev)
	case err != nil:
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	m, err := decode(raw, f.Keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestKey, err)
	}
	objs := make([]store.Object, len(m.Objects))
	for i, o := range m.Objects {
		objs[i] = store.Object{Key: o.Key, Version: o.Version}
	}
	sources, err := f.readAll(ctx, objs, func(i int, data []byte) error {
		o := m.Objects[i]
		if int64(len(data)) != o.Size {
			return fmt.Errorf("%s: %w: %d bytes, manifest says %d", o.Key, ErrIntegrity, len(data), o.Size)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != o.SHA256 {
			return fmt.Errorf("%s: %w: sha256 %s, manifest says %s", o.Key, ErrIntegrity, hex.EncodeToString(sum[:]), o.SHA256)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	id := policy.ID(sources)
	if m.Bundle != "" && id != m.Bundle {
		return nil, fmt.Errorf("%w: the objects make bundle %s, manifest says %s", ErrIntegrity, id, m.Bundle)
	}
	return &Snapshot{Sources: sources, BundleID: id, Manifested: true, Created: m.Created, Token: obj.ETag}, nil
}

// readAll reads objs (each at its version), a few at a time, as sources
// named by their keys; check, when set, vets each object's data.
func (f *Fetcher) readAll(ctx context.Context, objs []store.Object, check func(i int, data []byte) error) ([]policy.Source, error) {
	sources := make([]policy.Source, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for i, o := range objs {
		g.Go(func() error {
			data, err := f.Bucket.GetVersion(gctx, o.Key, o.Version)
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(i, data); err != nil {
					return err
				}
			}
			sources[i] = policy.Source{Name: o.Key, Data: data}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sources, nil
}

func (f *Fetcher) fetchListed(ctx context.Context, prev string) (*Snapshot, error) {
	if len(f.Keys) > 0 {
		return nil, fmt.Errorf("no manifest: %w (a public key is configured, so only signed bundles load)", ErrUnsigned)
	}
	objs, err := f.Bucket.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	h := sha256.New()
	var files []store.Object
	for _, o := range objs {
		if !bundleKey(o.Key) {
			continue
		}
		files = append(files, o)
		h.Write([]byte(o.Key + "\x00" + o.ETag + "\x00" + strconv.FormatInt(o.Size, 10) + "\x00"))
	}
	if len(files) == 0 {
		return nil, ErrEmpty
	}
	token := listToken + hex.EncodeToString(h.Sum(nil))
	if token == prev {
		return nil, ErrNotModified
	}
	sources, err := f.readAll(ctx, files, nil)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Sources: sources, BundleID: policy.ID(sources), Token: token}, nil
}

// PublishOptions tune Publish.
type PublishOptions struct {
	// SignKey, when set, signs the manifest.
	SignKey ed25519.PrivateKey
	// Now stamps the manifest (time.Now when zero).
	Now time.Time
}

// Publish uploads sources (a bundle that compiles: the caller checks) to
// bucket, then writes their manifest last, so readers switch from the old
// bundle to the new one in one step.
func Publish(ctx context.Context, bucket store.Bucket, sources []policy.Source, opts PublishOptions) (*Manifest, error) {
	if len(sources) == 0 {
		return nil, errors.New("publish: no files")
	}
	m := &Manifest{APIVersion: ManifestAPIVersion, Kind: ManifestKind, Bundle: policy.ID(sources), Created: opts.Now.UTC().Truncate(time.Second)}
	if opts.Now.IsZero() {
		m.Created = time.Now().UTC().Truncate(time.Second)
	}
	m.Objects = make([]ManifestObject, len(sources))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for i, s := range sources {
		if !bundleKey(s.Name) {
			return nil, fmt.Errorf("publish: %q is not a bundle file name", s.Name)
		}
		g.Go(func() error {
			obj, err := bucket.Put(gctx, s.Name, s.Data, contentType(s.Name))
			if err != nil {
				return fmt.Errorf("upload %s: %w", s.Name, err)
			}
			sum := sha256.Sum256(s.Data)
			m.Objects[i] = ManifestObject{Key: s.Name, Size: int64(len(s.Data)), SHA256: hex.EncodeToString(sum[:]), Version: obj.Version}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	data, err := encode(m, opts.SignKey)
	if err != nil {
		return nil, err
	}
	if _, err := bucket.Put(ctx, ManifestKey, data, "application/json"); err != nil {
		return nil, fmt.Errorf("upload manifest: %w", err)
	}
	return m, nil
}

func contentType(name string) string {
	if path.Ext(name) == ".json" {
		return "application/json"
	}
	return "application/yaml"
}
