package bundle

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle/store"
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
	// Serial and Expires are the manifest's (zero without one).
	Serial  int64
	Expires time.Time
	// CompiledBy is the manifest's (nil without one).
	CompiledBy *Toolchain
	// Packed: the files were read from the manifest's packed object
	// (PackedKey). They carry their Documents when CompiledBy is this
	// build's toolchain.
	Packed bool
	// Retired are the manifest's retired routes, with their bundles'
	// files while their transitions last.
	Retired []RetiredSnapshot
	// manifestRetired is what the manifest says of them, index for index.
	manifestRetired []Retired
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
	// Now tells the time manifests expire by (time.Now when nil).
	Now func() time.Time
}

const listToken = "list:"

// Fetch returns the bundle at the location, or ErrNotModified when its
// token is still prev. With a manifest, it reads exactly the objects the
// manifest names (by version where the store keeps them; from a bucket, the
// packed one alone when the manifest names it) and verifies each one's size
// and sha256, and the bundle ID, so it returns the whole upload the
// manifest describes or an error. Without one, it reads every policy file
// listed under the prefix.
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
	if err == nil {
		err = f.current(m)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestKey, err)
	}
	return f.fetchManifest(ctx, m, obj.ETag)
}

// fetchManifest reads and checks the objects m, a manifest that verified,
// names.
func (f *Fetcher) fetchManifest(ctx context.Context, m *Manifest, token string) (*Snapshot, error) {
	var err error
	check := func(i int, data []byte) error { return checkObject(m.Objects[i], data) }
	if !f.remote() {
		if err := f.unlisted(ctx, m); err != nil {
			return nil, err
		}
	}
	var sources []policy.Source
	if m.Packed != nil {
		// The packed documents replace parsing the files only where a
		// signature binds them to the files: a verified manifest (decode
		// verified it, as keys are configured) names the packed object's
		// digest, and was written by a push that made the documents from
		// those files. Without one, whoever edits packed.json could make a
		// function enforce documents that no reviewed file says.
		sources, err = f.readPacked(ctx, m, check, m.CompiledBy.IsThis() && len(f.Keys) > 0)
		// A directory's files are what its users read and edit in place: a
		// file changed or removed since the push is an error, as it is
		// without the packed form, not a bundle served from the packed
		// copy. Reading them is local and cheap; from a bucket it is what
		// the packed form saves.
		if err == nil && !f.remote() {
			_, err = f.readAll(ctx, manifestObjects(m), check)
		}
	} else {
		sources, err = f.readAll(ctx, manifestObjects(m), check)
	}
	if err != nil {
		return nil, err
	}
	id := policy.ID(sources)
	if m.Bundle != "" && id != m.Bundle {
		return nil, fmt.Errorf("%w: the objects make bundle %s, manifest says %s", ErrIntegrity, id, m.Bundle)
	}
	retired := f.readRetired(ctx, m, f.now())
	return &Snapshot{Sources: sources, BundleID: id, Manifested: true, Created: m.Created, Serial: m.Serial, Expires: m.Expires, CompiledBy: m.CompiledBy, Packed: m.Packed != nil, Retired: retired, manifestRetired: m.Retired, Token: token}, nil
}

// unlisted refuses a directory holding a policy file its manifest does not
// name: one added after the push would be read by every CLI command and
// enforced by no function. A bucket keeps what earlier pushes left, and
// only the manifest is read there.
func (f *Fetcher) unlisted(ctx context.Context, m *Manifest) error {
	objs, err := f.Bucket.List(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	named := make(map[string]bool, len(m.Objects))
	for _, o := range m.Objects {
		named[o.Key] = true
	}
	var extra []string
	for _, o := range objs {
		if bundleKey(o.Key) && !named[o.Key] {
			extra = append(extra, o.Key)
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("%w: %s, not named by %s, which the bundle was pushed with: push the bundle again (admitfn push -p … --to %s) to include it, or remove it", ErrUnlisted, strings.Join(extra, ", "), ManifestKey, f.Bucket.Location())
	}
	return nil
}

// manifestObjects are the objects m names, each at its version.
func manifestObjects(m *Manifest) []store.Object {
	objs := make([]store.Object, len(m.Objects))
	for i, o := range m.Objects {
		objs[i] = store.Object{Key: o.Key, Version: o.Version}
	}
	return objs
}

// remote reports whether the bundle is in an object store rather than a
// directory.
func (f *Fetcher) remote() bool {
	loc, err := store.ParseLocation(f.Bucket.Location())
	return err == nil && loc.Remote()
}

// current refuses a manifest published for another location or expired.
// Signed manifests at a bucket must say both, and carry a serial, or the
// signature would not bind them: an old signed manifest without them could
// be put back anywhere, forever.
func (f *Fetcher) current(m *Manifest) error {
	here := f.Bucket.Location()
	remote := f.remote()
	if len(f.Keys) > 0 && remote {
		var missing []string
		if m.Serial <= 0 {
			missing = append(missing, "serial")
		}
		if m.Location == "" {
			missing = append(missing, "location")
		}
		if m.Expires.IsZero() {
			missing = append(missing, "expires")
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: a signed manifest must carry %s (publish it with this version of admitfn push)", ErrInvalidManifest, strings.Join(missing, ", "))
		}
	}
	if limit := serialLimit(f.now()); m.Serial > limit {
		return fmt.Errorf("%w: serial %d is more than %d days ahead of this function's clock (at most %d now)", ErrInvalidManifest, m.Serial, MaxSerialLead/86400, limit)
	}
	if m.Location != "" && m.Location != here {
		return fmt.Errorf("%w: published for %s, read from %s", ErrWrongLocation, m.Location, here)
	}
	if !m.Expires.IsZero() && !f.now().Before(m.Expires) {
		return fmt.Errorf("%w: expired at %s (re-sign it with admitfn push --resign)", ErrExpired, m.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// Newer refuses next when it would roll back from prev, the snapshot
// serving: a lower serial, or the same serial for another bundle. Bundles
// read without a manifest carry no serial and are not compared.
func Newer(prev, next *Snapshot) error {
	if prev == nil || !prev.Manifested || !next.Manifested {
		return nil
	}
	switch {
	case next.Serial < prev.Serial:
		return fmt.Errorf("%w: serial %d (bundle %s), serving serial %d (bundle %s)", ErrRollback, next.Serial, next.BundleID, prev.Serial, prev.BundleID)
	case next.Serial == prev.Serial && next.BundleID != prev.BundleID:
		return fmt.Errorf("%w: serial %d names bundle %s, serving bundle %s with the same serial", ErrRollback, next.Serial, next.BundleID, prev.BundleID)
	}
	return nil
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

// DefaultExpiry is how long a manifest published to a bucket stays valid.
const DefaultExpiry = 30 * 24 * time.Hour

// PublishOptions tune Publish and Resign.
type PublishOptions struct {
	// SignKey, when set, signs the manifest.
	SignKey ed25519.PrivateKey
	// TrustedKeys are the keys functions verify manifests with, besides
	// SignKey's own. The serial follows only a present manifest that
	// verifies with one of them; and with any, an unsigned publish is
	// refused, as functions would refuse it.
	TrustedKeys []ed25519.PublicKey
	// Warn, when set, is told what the publish ignored (a manifest in the
	// way that functions would not accept).
	Warn func(string)
	// Now stamps the manifest (time.Now when zero).
	Now time.Time
	// Expiry is how long a manifest published to a bucket stays valid
	// (DefaultExpiry when zero). Manifests in directories do not expire.
	Expiry time.Duration
	// CompiledBy, when set, is recorded in the manifest: the toolchain that
	// compiled the sources without error.
	CompiledBy *Toolchain
	// Pack also writes the packed form of the bundle (PackedKey), named by
	// the manifest, which functions read instead of the files from a
	// bucket (a directory's files are still checked); unless it would be
	// larger than a function reads (store.MaxObjectBytes).
	Pack bool
	// Uploaded, when set, is called after each object is stored, one call
	// at a time.
	Uploaded func(ManifestObject)
	// Removed, when set, is called with the key of each object the publish
	// removed: one the bundle it replaced had and it has not.
	Removed func(key string)
	// Transition is how long functions keep serving the routes the publish
	// retires, with the bundle that had them (DefaultTransition when zero;
	// none when negative).
	Transition time.Duration
	// Webhooks, when set, is stored at WebhooksKey and named by the
	// manifest: the bundle's rendered webhook configurations.
	Webhooks []byte
	// Replaces, when set, is the bundle at the location as Published read
	// it (for a diff before the publish): used instead of reading it again
	// while the manifest in place still has its serial.
	Replaces *Snapshot
	// AllowUnsigned publishes an unsigned bundle over a signed location,
	// which its functions refuse: only to stop signing it on purpose.
	AllowUnsigned bool
	// Lease is how long a publish may hold the location's lock
	// (DefaultLease when zero); to a bucket it writes nothing after it.
	Lease time.Duration
	// beforeCommit, when set, runs before the manifest is written (tests
	// hold two publishes there).
	beforeCommit func()
}

func (o PublishOptions) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
	}
}

func (o PublishOptions) removed(key string) {
	if o.Removed != nil {
		o.Removed(key)
	}
}

func (o PublishOptions) now() time.Time {
	if o.Now.IsZero() {
		return time.Now().UTC().Truncate(time.Second)
	}
	return o.Now.UTC().Truncate(time.Second)
}

// MaxSerialLead is how far a manifest's serial may run ahead of the clock,
// in seconds. Push stamps the larger of the time in Unix seconds and the
// previous serial plus one, so only more than one push a second, kept up
// for a year, would reach it; a serial beyond it is a forgery or a
// mistake, and accepting it would make every honest push after it look
// like a rollback.
const MaxSerialLead = 366 * 24 * 60 * 60

// serialLimit is the highest serial a function accepts at now.
func serialLimit(now time.Time) int64 { return now.Unix() + MaxSerialLead }

// stamp gives m the serial after prev, the serial of the manifest it
// replaces (0 for none), and at a bucket its location and expiry.
func stamp(bucket store.Bucket, m *Manifest, prev int64, opts PublishOptions) error {
	now := opts.now()
	// At least the time in Unix seconds: serials keep increasing even
	// after a manifest is lost.
	m.Serial = max(now.Unix(), prev+1)
	if limit := serialLimit(now); prev >= limit || m.Serial > limit {
		return fmt.Errorf("publish: serial %d would be more than %d days ahead of the clock, which functions refuse; the manifest it replaces has serial %d", m.Serial, MaxSerialLead/86400, prev)
	}
	m.Location, m.Expires = "", time.Time{}
	if loc, err := store.ParseLocation(bucket.Location()); err == nil && loc.Remote() {
		expiry := opts.Expiry
		if expiry <= 0 {
			expiry = DefaultExpiry
		}
		m.Location, m.Expires = loc.String(), now.Add(expiry)
	}
	return nil
}

// trusted are the keys a publish verifies the present manifest with, and
// reads its own back with: opts.TrustedKeys and the signing key's own.
func (o PublishOptions) trusted() []ed25519.PublicKey {
	keys := slices.Clone(o.TrustedKeys)
	if o.SignKey != nil {
		keys = append(keys, o.SignKey.Public().(ed25519.PublicKey))
	}
	return keys
}

// previousBundle reads the bundle of prev, the present manifest, as a
// function that trusts opts's keys would have when it was published (an
// expired manifest's bundle still serves); nil, with a warning, when it
// cannot be read: its routes then get no transition.
func previousBundle(ctx context.Context, bucket store.Bucket, prev *Manifest, opts PublishOptions) *Snapshot {
	if prev == nil {
		return nil
	}
	at := prev.Created
	if at.IsZero() {
		at = opts.now()
	}
	f := &Fetcher{Bucket: bucket, Keys: opts.trusted(), Now: func() time.Time { return at }}
	// Checked as a function checked it then: the location and the serial
	// were (counts), the expiry may have passed since.
	snap, err := f.fetchManifest(ctx, prev, "")
	if err != nil {
		opts.warn(fmt.Sprintf("the bundle at %s cannot be read (%v): webhook configurations rendered for it get no transition", bucket.Location(), err))
		// The routes it retired keep theirs: each has a bundle of its own.
		return &Snapshot{Manifested: true, Serial: prev.Serial, Retired: f.readRetired(ctx, prev, opts.now()), manifestRetired: prev.Retired}
	}
	return snap
}

// readBack fetches what a publish wrote as a function that trusts its keys
// would, and fails on anything such a function would refuse, or on another
// manifest than m (a concurrent push).
func readBack(ctx context.Context, bucket store.Bucket, m *Manifest, opts PublishOptions) error {
	f := &Fetcher{Bucket: bucket, Keys: opts.trusted(), Now: opts.now}
	snap, err := f.Fetch(ctx, "")
	if err != nil {
		return fmt.Errorf("read back the published bundle: %w", err)
	}
	if snap.Serial != m.Serial || snap.BundleID != m.Bundle {
		return fmt.Errorf("read back the published bundle: the location holds bundle %s with serial %d, not bundle %s with serial %d: another push replaced it", snap.BundleID, snap.Serial, m.Bundle, m.Serial)
	}
	return nil
}

// Publish uploads sources (a bundle that compiles: the caller checks) to
// bucket, then writes their manifest last, so readers switch from the old
// bundle to the new one in one step. It holds the location's lock
// throughout, and writes the manifest only over the one it read: of two
// publishes, one fails (ErrLocked, ErrLostRace) and writes no manifest.
func Publish(ctx context.Context, bucket store.Bucket, sources []policy.Source, opts PublishOptions) (*Manifest, error) {
	if len(sources) == 0 {
		return nil, errors.New("publish: no files")
	}
	for _, s := range sources {
		if len(s.Data) > store.MaxObjectBytes {
			return nil, fmt.Errorf("publish: %s is %d bytes, larger than functions read (%d MiB a file)", s.Name, len(s.Data), store.MaxObjectBytes>>20)
		}
		if !bundleKey(s.Name) {
			return nil, fmt.Errorf("publish: %q is not a bundle file name", s.Name)
		}
	}
	ctx, unlock, err := locked(ctx, bucket, &opts)
	if err != nil {
		return nil, err
	}
	defer unlock()
	p, err := readPlace(ctx, bucket, opts)
	if err != nil {
		return nil, err
	}
	if err := checkSigning(bucket, p, opts); err != nil {
		return nil, err
	}
	prev := p.prev
	prevSnap := opts.Replaces
	if prev == nil || prevSnap == nil || prevSnap.Serial != prev.Serial {
		prevSnap = previousBundle(ctx, bucket, prev, opts)
	}
	// A bundle that does not parse (the caller checks it does) has no
	// routes to compare.
	routes, routesErr := Routes(sources)
	stale, err := staleFiles(ctx, bucket, sources)
	if err != nil {
		return nil, err
	}
	m := &Manifest{APIVersion: ManifestAPIVersion, Kind: ManifestKind, Bundle: policy.ID(sources), Created: opts.now(), CompiledBy: opts.CompiledBy}
	var prevSerial int64
	if prev != nil {
		prevSerial = prev.Serial
	}
	if err := stamp(bucket, m, prevSerial, opts); err != nil {
		return nil, err
	}
	m.Objects = make([]ManifestObject, len(sources))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	var progress sync.Mutex
	uploaded := func(o ManifestObject) {
		if opts.Uploaded != nil {
			progress.Lock()
			defer progress.Unlock()
			opts.Uploaded(o)
		}
	}
	for i, s := range sources {
		g.Go(func() error {
			o, err := putObject(gctx, bucket, s.Name, s.Data, contentType(s.Name))
			if err != nil {
				return err
			}
			m.Objects[i] = o
			uploaded(o)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if opts.Pack {
		data, err := pack(sources)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		// Too large for a function to read: the files are read instead.
		if len(data) <= store.MaxObjectBytes {
			o, err := putObject(ctx, bucket, PackedKey, data, "application/json")
			if err != nil {
				return nil, err
			}
			m.Packed = &o
			uploaded(o)
		}
	}
	if prevSnap != nil && routesErr == nil {
		if m.Retired, err = retire(ctx, bucket, prevSnap, routes, opts); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
	}
	if opts.Webhooks != nil {
		o, err := putObject(ctx, bucket, WebhooksKey, opts.Webhooks, "application/json")
		if err != nil {
			return nil, err
		}
		m.Webhooks = &o
		uploaded(o)
	}
	if opts.beforeCommit != nil {
		opts.beforeCommit()
	}
	if err := putManifest(ctx, bucket, p, m, opts.SignKey); err != nil {
		return nil, err
	}
	if prevSnap != nil {
		stale = append(stale, unreferenced(bucket, prevSnap, m)...)
	}
	for _, key := range stale {
		if err := bucket.(store.Remover).Remove(ctx, key); err != nil {
			return nil, fmt.Errorf("publish: remove %s, which the bundle no longer has: %w", key, err)
		}
		opts.removed(key)
	}
	if err := readBack(ctx, bucket, m, opts); err != nil {
		return nil, err
	}
	if !p.fromCopy {
		// A manifest in place that did not count names no object this
		// publish may delete.
		removeReplaced(ctx, bucket, prev, m, opts)
	}
	return m, nil
}

// removeReplaced deletes from a bucket the objects prev, the manifest this
// publish replaced, named and m does not: the files the bundle no longer
// has, a packed form or retired bundle it dropped. Only once m is written
// and read back, and only what a manifest named, so objects others keep
// under the prefix stay. Where the bucket keeps versions, the versions
// prev pinned stay readable. A failure (no delete permission) is a
// warning: the bundle is published, and functions read only what m names.
func removeReplaced(ctx context.Context, bucket store.Bucket, prev, m *Manifest, opts PublishOptions) {
	r, ok := bucket.(store.Remover)
	if loc, err := store.ParseLocation(bucket.Location()); !ok || prev == nil || err != nil || !loc.Remote() {
		return
	}
	named := func(m *Manifest) []string {
		var keys []string
		for _, o := range m.Objects {
			keys = append(keys, o.Key)
		}
		for _, o := range []*ManifestObject{m.Packed, m.Webhooks} {
			if o != nil {
				keys = append(keys, o.Key)
			}
		}
		for _, r := range m.Retired {
			keys = append(keys, r.Object.Key)
		}
		return keys
	}
	keep := map[string]bool{ManifestKey: true}
	for _, k := range named(m) {
		keep[k] = true
	}
	// Another push may have landed since the read back: then the files
	// are its to keep or not, and none is removed.
	raw, _, err := bucket.Get(ctx, ManifestKey, "")
	if err != nil {
		opts.warn(fmt.Sprintf("left the files the bundle it replaced had: the manifest could not be read again: %v", err))
		return
	}
	if now, err := decode(raw, nil); err != nil || now.Serial != m.Serial || now.Bundle != m.Bundle {
		opts.warn("left the files the bundle it replaced had: another push replaced this one meanwhile")
		return
	}
	for _, key := range named(prev) {
		if keep[key] || !store.ValidKey(key) {
			continue
		}
		keep[key] = true // once
		if err := r.Remove(ctx, key); err != nil && !errors.Is(err, store.ErrNotFound) {
			opts.warn(fmt.Sprintf("could not remove %s, which the bundle it replaced had and it has not: %v", key, err))
			continue
		}
		opts.removed(key)
	}
}

// staleFiles are the files of a directory that an earlier push wrote and
// sources no longer have: Publish removes them once the new manifest is
// written. A policy file there that neither an earlier manifest nor sources
// name is an error: push does not delete what it did not write, and a
// function would refuse the directory with it. Buckets have none.
func staleFiles(ctx context.Context, bucket store.Bucket, sources []policy.Source) ([]string, error) {
	_, ok := bucket.(store.Remover)
	if loc, err := store.ParseLocation(bucket.Location()); !ok || err != nil || loc.Remote() {
		return nil, nil
	}
	objs, err := bucket.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	pushed := map[string]bool{}
	if raw, _, err := bucket.Get(ctx, ManifestKey, ""); err == nil {
		if old, err := decode(raw, nil); err == nil {
			for _, o := range old.Objects {
				pushed[o.Key] = true
			}
		}
	}
	wanted := make(map[string]bool, len(sources))
	for _, s := range sources {
		wanted[s.Name] = true
	}
	var stale, foreign []string
	for _, o := range objs {
		switch {
		case !bundleKey(o.Key) || wanted[o.Key]:
		case pushed[o.Key]:
			stale = append(stale, o.Key)
		default:
			foreign = append(foreign, o.Key)
		}
	}
	if len(foreign) > 0 {
		return nil, fmt.Errorf("publish: %s holds %s, which is not part of the bundle nor of an earlier push: remove it, or push to an empty directory", bucket.Location(), strings.Join(foreign, ", "))
	}
	return stale, nil
}

// ErrNothingToResign: the location holds no manifest.
var ErrNothingToResign = errors.New("no manifest to re-sign: publish the bundle first")

// Resign signs the manifest at bucket again with a new serial and expiry,
// leaving its objects as they are: what keeps an unchanged bundle loading
// past its expiry. The present manifest must verify with opts.SignKey, name
// this location, and be bundleID, the bundle the signer knows it
// published: whoever writes the bucket can put back an older manifest the
// key signed, and re-signing whatever is there would give it a fresh serial
// and expiry. As TUF's timestamp role signs the snapshot the repository
// gives it, never one a mirror serves, the re-signer takes what to sign
// from its own side (the policies, or the bundle ID), and the bucket only
// supplies the bytes.
func Resign(ctx context.Context, bucket store.Bucket, bundleID string, opts PublishOptions) (*Manifest, error) {
	if opts.SignKey == nil {
		return nil, errors.New("re-sign: a signing key is required")
	}
	if bundleID == "" {
		return nil, errors.New("re-sign: name the bundle to re-sign (its policies, or its bundle ID): a manifest someone put back in the bucket is signed by this key too, and re-signing it would roll every function back")
	}
	if err := checkSigning(bucket, &place{}, opts); err != nil {
		return nil, err
	}
	ctx, unlock, err := locked(ctx, bucket, &opts)
	if err != nil {
		return nil, err
	}
	defer unlock()
	raw, obj, err := bucket.Get(ctx, ManifestKey, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNothingToResign
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	m, err := decode(raw, []ed25519.PublicKey{opts.SignKey.Public().(ed25519.PublicKey)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w; only a manifest signed by this key is re-signed: push the bundle instead", ManifestKey, err)
	}
	if m.Location != "" && m.Location != bucket.Location() {
		return nil, fmt.Errorf("%s: %w: published for %s, found at %s", ManifestKey, ErrWrongLocation, m.Location, bucket.Location())
	}
	if m.Bundle != bundleID {
		return nil, fmt.Errorf("%s names bundle %s (serial %d, created %s), not %s, the bundle to re-sign: if you did not publish it, someone put an older manifest back; push the bundle instead", ManifestKey, m.Bundle, m.Serial, m.Created.UTC().Format(time.RFC3339), bundleID)
	}
	if m.Serial < 0 || m.Serial > serialLimit(opts.now()) {
		return nil, fmt.Errorf("%s: %w: serial %d is out of the range functions accept; push the bundle instead", ManifestKey, ErrInvalidManifest, m.Serial)
	}
	if err := stamp(bucket, m, m.Serial, opts); err != nil {
		return nil, err
	}
	// Routes whose transition is over are dropped: a re-signed manifest
	// never lengthens one.
	m.Retired = slices.DeleteFunc(m.Retired, func(r Retired) bool { return !opts.now().Before(r.Until) })
	if opts.beforeCommit != nil {
		opts.beforeCommit()
	}
	if err := putManifest(ctx, bucket, &place{etag: obj.ETag}, m, opts.SignKey); err != nil {
		return nil, err
	}
	if err := readBack(ctx, bucket, m, opts); err != nil {
		return nil, err
	}
	return m, nil
}

// putManifest signs m, when key is set, and writes it over the manifest p
// read: last, so that a reader that follows it never sees half of an
// upload. A signed one is kept at SignedKey too, for the next push.
func putManifest(ctx context.Context, bucket store.Bucket, p *place, m *Manifest, key ed25519.PrivateKey) error {
	data, err := encode(m, key)
	if err != nil {
		return err
	}
	if err := commit(ctx, bucket, p, data); err != nil {
		return err
	}
	if key != nil {
		if _, err := bucket.Put(ctx, SignedKey, data, "application/json"); err != nil {
			return fmt.Errorf("published, but could not keep a copy of the signed manifest at %s: %w", SignedKey, err)
		}
	}
	return nil
}

func contentType(name string) string {
	if path.Ext(name) == ".json" {
		return "application/json"
	}
	return "application/yaml"
}

func (f *Fetcher) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}
