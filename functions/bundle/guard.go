package bundle

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

// What keeps publishing to one location safe from a careless push and from
// another push running at the same time: a publish takes the location's
// lock before it reads anything, writes the manifest only over the one it
// read (the store's compare-and-swap), refuses to leave a signed location
// unsigned or signed by a key its functions do not hold, and keeps a copy
// of the last signed manifest, which the next signed push follows when the
// manifest in place does not verify.

// SignedKey is where a signed publish keeps a copy of its manifest: the
// last one signed for the location. Functions never read it; a push reads
// it to know the location is signed, and follows its serial and retired
// routes when the manifest in place does not verify.
const SignedKey = ".admitfn/signed.json"

// LockKey is the location's publish lock, held by one push or re-sign at a
// time for at most its lease.
const LockKey = ".admitfn/lock.json"

// DefaultLease is how long a publish holds the lock when
// PublishOptions.Lease is zero.
const DefaultLease = 3 * time.Minute

// Errors of a publish that would leave the location worse, matched with
// errors.Is.
var (
	// ErrSignedLocation: an unsigned publish over a signed location, or one
	// signed by a key the location's functions do not hold.
	ErrSignedLocation = errors.New("the location's bundles are signed")
	// ErrLocked: another publish holds the location's lock.
	ErrLocked = errors.New("another push is publishing to the location")
	// ErrLostRace: the manifest changed between this publish's read and
	// its write; it wrote no manifest.
	ErrLostRace = errors.New("another push replaced the manifest meanwhile")
)

// lockRecord is the lock object's content.
type lockRecord struct {
	Holder  string    `json:"holder"`
	Host    string    `json:"host,omitempty"`
	Started time.Time `json:"started"`
	Expires time.Time `json:"expires"`
}

// lock is a held publish lock.
type lock struct {
	bucket  store.Bucket
	rec     lockRecord
	expires time.Time
}

// acquire takes the location's lock for opts.Lease: created only where
// there is none, or taken over from one whose lease has passed (a push
// that died). A push that holds it stops writing when its lease ends.
func acquire(ctx context.Context, bucket store.Bucket, opts PublishOptions) (*lock, error) {
	lease := opts.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	id := make([]byte, 8)
	rand.Read(id)
	host, _ := os.Hostname()
	now := opts.now()
	rec := lockRecord{Holder: hex.EncodeToString(id), Host: host, Started: now, Expires: now.Add(lease)}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	_, err = bucket.PutIf(ctx, LockKey, data, "application/json", "")
	if errors.Is(err, store.ErrConflict) {
		raw, obj, gerr := bucket.Get(ctx, LockKey, "")
		var held lockRecord
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			// Released meanwhile: try once more.
			_, err = bucket.PutIf(ctx, LockKey, data, "application/json", "")
		case gerr != nil:
			return nil, fmt.Errorf("read the publish lock: %w", gerr)
		case json.Unmarshal(raw, &held) == nil && now.Before(held.Expires):
			return nil, fmt.Errorf("%w: %s holds %s since %s, until %s at the latest: wait for it and push again (if that push died, remove the lock or wait until then)",
				ErrLocked, held.who(), bucket.Location()+"/"+LockKey, held.Started.UTC().Format(time.RFC3339), held.Expires.UTC().Format(time.RFC3339))
		default:
			// Its lease is over (or it is not a lock): take it over, only
			// if no other push took it first. A lease its push ended
			// itself, as every push does when done, is no news.
			if !held.Expires.IsZero() {
				opts.warn(fmt.Sprintf("took over the publish lock of %s, whose lease ended at %s", held.who(), held.Expires.UTC().Format(time.RFC3339)))
			}
			_, err = bucket.PutIf(ctx, LockKey, data, "application/json", obj.ETag)
		}
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: another push took %s first: push again once it ends", ErrLocked, bucket.Location()+"/"+LockKey)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("take the publish lock %s: %w", LockKey, err)
	}
	// By this process's clock: the record's is opts.Now's, which other
	// pushes compare with theirs.
	return &lock{bucket: bucket, rec: rec, expires: time.Now().Add(lease)}, nil
}

func (r lockRecord) who() string {
	if r.Host != "" {
		return "a push from " + r.Host
	}
	return "a push"
}

// locked takes the location's lock for a publish: the context it returns
// ends with the lease, so that the publish never writes after another push
// could have taken the lock over; unlock releases it. It fixes opts.Now:
// the lock's start, the manifest's creation and expiry and the retired
// routes' ends all count from one time.
func locked(ctx context.Context, bucket store.Bucket, opts *PublishOptions) (_ context.Context, unlock func(), _ error) {
	opts.Now = opts.now()
	l, err := acquire(ctx, bucket, *opts)
	if err != nil {
		return nil, nil, err
	}
	leased, cancel := context.WithDeadline(ctx, l.expires)
	return leased, func() { cancel(); l.release(ctx) }, nil
}

// release ends the lease of the lock if it is still this publish's,
// writing only over this lock. The lock object stays: a create after a
// delete is not a precondition every S3-compatible store honours on a
// versioned bucket, and the next push takes an ended lock over.
func (l *lock) release(ctx context.Context) {
	raw, obj, err := l.bucket.Get(ctx, LockKey, "")
	var held lockRecord
	if err != nil || json.Unmarshal(raw, &held) != nil || held.Holder != l.rec.Holder {
		return
	}
	ended := l.rec
	ended.Expires = time.Time{}
	if data, err := json.Marshal(ended); err == nil {
		l.bucket.PutIf(ctx, LockKey, data, "application/json", obj.ETag)
	}
}

// place is what a publish finds at its location before it writes.
type place struct {
	// prev is the manifest a new one follows (its serial, its retired
	// routes): the one in place when it counts, else, with keys to verify,
	// the last signed copy when it does.
	prev *Manifest
	// fromCopy: prev is the last signed copy, not the manifest in place.
	fromCopy bool
	// etag is the manifest object's in place ("" for none): a publish
	// writes its manifest only over that one.
	etag string
	// signedBy are the key IDs that signed the manifest in place and the
	// last signed copy: functions of a signed location verify with one of
	// those keys.
	signedBy []string
}

// signers are the key IDs an envelope names, verified or not.
func signers(raw []byte) []string {
	var env envelope
	if json.Unmarshal(raw, &env) != nil {
		return nil
	}
	var ids []string
	for _, s := range env.Signatures {
		if s.KeyID != "" && !slices.Contains(ids, s.KeyID) {
			ids = append(ids, s.KeyID)
		}
	}
	return ids
}

// readPlace reads the manifest in place and, where it does not count, the
// last signed copy.
func readPlace(ctx context.Context, bucket store.Bucket, opts PublishOptions) (*place, error) {
	raw, obj, err := bucket.Get(ctx, ManifestKey, "")
	p := &place{}
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("read the present manifest: %w", err)
	default:
		p.etag = obj.ETag
		p.signedBy = signers(raw)
		p.prev = counts(raw, bucket, opts, true)
	}
	copyRaw, _, err := bucket.Get(ctx, SignedKey, "")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("read the last signed manifest: %w", err)
	}
	// Both count: a key an attacker names in the manifest in place does
	// not make the location's own key look foreign.
	for _, id := range signers(copyRaw) {
		if !slices.Contains(p.signedBy, id) {
			p.signedBy = append(p.signedBy, id)
		}
	}
	if p.prev == nil && len(opts.trusted()) > 0 {
		if p.prev = counts(copyRaw, bucket, opts, false); p.prev != nil {
			p.fromCopy = true
			opts.warn(fmt.Sprintf("following the last signed manifest (%s: bundle %s, serial %d) instead", SignedKey, p.prev.Bundle, p.prev.Serial))
		}
	}
	return p, nil
}

// counts decodes raw, a manifest at bucket, when functions would accept it
// (nil when not): with trusted keys, only one that verifies with one of
// them and names this location counts; without, only one whose serial is
// within what functions accept. Whoever can write the bucket can put a
// manifest there, with any serial. A manifest in place that does not count
// is reported through opts.Warn.
func counts(raw []byte, bucket store.Bucket, opts PublishOptions, inPlace bool) *Manifest {
	warn := func(string) {}
	if inPlace {
		warn = opts.warn
	}
	keys := opts.trusted()
	old, err := decode(raw, keys)
	switch {
	case err != nil && len(keys) > 0:
		warn(fmt.Sprintf("the manifest at %s does not verify with a trusted key (%v): its serial is not followed", bucket.Location(), err))
		return nil
	case err != nil:
		warn(fmt.Sprintf("the manifest at %s does not decode (%v): its serial is not followed", bucket.Location(), err))
		return nil
	case old.Location != "" && old.Location != bucket.Location():
		warn(fmt.Sprintf("the manifest at %s was published for %s: its serial is not followed", bucket.Location(), old.Location))
		return nil
	case old.Serial < 0 || old.Serial > serialLimit(opts.now()):
		warn(fmt.Sprintf("the manifest at %s has serial %d, which functions refuse: it is not followed (functions still serving it refuse this push as a rollback until they restart)", bucket.Location(), old.Serial))
		return nil
	}
	return old
}

// checkSigning refuses a publish no function of the location would load,
// before anything is written: an unsigned one where the manifest in place
// (or the last signed copy) is signed, or while opts.TrustedKeys names
// keys; and one signed by a key the functions do not hold, which are
// opts.TrustedKeys when set, and otherwise the keys that signed the
// location's manifest.
func checkSigning(bucket store.Bucket, p *place, opts PublishOptions) error {
	if opts.SignKey == nil {
		switch {
		case len(opts.TrustedKeys) > 0:
			return fmt.Errorf("publish: %w: functions that trust key %s refuse an unsigned bundle: sign it", ErrSignedLocation, KeyID(opts.TrustedKeys[0]))
		case len(p.signedBy) > 0 && !opts.AllowUnsigned:
			return fmt.Errorf("publish: %w: the manifest at %s is signed by key %s, so its functions verify signatures: they would refuse an unsigned bundle, and every instance that starts after it would serve none. Sign it with --sign-key (push --allow-unsigned only to stop signing this location on purpose, after removing ADMITFN_BUNDLE_PUBLIC_KEY from every function)",
				ErrSignedLocation, bucket.Location(), strings.Join(p.signedBy, ", "))
		}
		return nil
	}
	id := KeyID(opts.SignKey.Public().(ed25519.PublicKey))
	if len(opts.TrustedKeys) > 0 {
		for _, k := range opts.TrustedKeys {
			if KeyID(k) == id {
				return nil
			}
		}
		var ids []string
		for _, k := range opts.TrustedKeys {
			ids = append(ids, KeyID(k))
		}
		return fmt.Errorf("publish: %w: functions that trust key %s (ADMITFN_BUNDLE_PUBLIC_KEY) refuse a bundle signed by key %s: sign with one of their keys, or add this key's public half to ADMITFN_BUNDLE_PUBLIC_KEY here and in every function first", ErrSignedLocation, strings.Join(ids, ", "), id)
	}
	if len(p.signedBy) > 0 && !slices.Contains(p.signedBy, id) {
		return fmt.Errorf("publish: %w: the manifest at %s is signed by key %s, not by key %s: functions that verify it with that key would refuse this bundle. For a key rotation, set ADMITFN_BUNDLE_PUBLIC_KEY here to the public keys every function trusts (the new one among them)",
			ErrSignedLocation, bucket.Location(), strings.Join(p.signedBy, ", "), id)
	}
	return nil
}

// commit writes the manifest data over the one p read, and nothing when
// another write replaced it meanwhile.
func commit(ctx context.Context, bucket store.Bucket, p *place, data []byte) error {
	_, err := bucket.PutIf(ctx, ManifestKey, data, "application/json", p.etag)
	if errors.Is(err, store.ErrConflict) {
		now := "another manifest"
		if raw, _, err := bucket.Get(ctx, ManifestKey, ""); err == nil {
			if m, err := decode(raw, nil); err == nil {
				now = fmt.Sprintf("bundle %s with serial %d", m.Bundle, m.Serial)
			}
		}
		return fmt.Errorf("publish: %w: %s now holds %s: this push wrote no manifest, and functions keep reading that one; check what it publishes (admitfn diff) and push again", ErrLostRace, bucket.Location(), now)
	}
	if err != nil {
		return fmt.Errorf("upload manifest: %w", err)
	}
	return nil
}
