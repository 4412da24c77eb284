// Package bundle publishes policy bundles to a store as consistent
// snapshots and fetches them back: the objects first, then a manifest,
// written last, that names each object by key, size, sha256 and version, and
// may be signed with ed25519. A reader that follows the manifest never sees
// half of an upload.
package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/version"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// ManifestKey is where the manifest lives under the bundle's prefix. Its
// directory is hidden, so bundle loaders never take it for a policy file.
const ManifestKey = ".admitfn/manifest.json"

// The manifest's type.
const (
	ManifestAPIVersion = "admitfn.io/v1alpha1"
	ManifestKind       = "BundleManifest"
)

// Manifest names a bundle's objects exactly.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Bundle is the bundle ID (policy.ID) of the objects: the ID the engine
	// reports once they are loaded. Optional: writers that cannot compute it
	// (Terraform) leave it out; when present, it must match.
	Bundle string `json:"bundle,omitempty"`
	// Created is when the bundle was published; optional.
	Created time.Time `json:"created"`
	// Serial only increases from one manifest published at a location to
	// the next: a function refuses a manifest with a lower serial than the
	// one it serves (a rollback), or the same serial for other objects.
	// Optional for unsigned manifests.
	Serial int64 `json:"serial,omitempty"`
	// Location is where the manifest was published (s3://bucket/prefix,
	// gs://bucket/prefix); a function reading it anywhere else refuses it,
	// so a signed manifest cannot be replayed at another location. Empty
	// for directories, which are part of a deployment.
	Location string `json:"location,omitempty"`
	// Expires is when functions stop accepting the manifest, so that an
	// old one put back bounds how long it can take effect. Zero: never.
	Expires time.Time `json:"expires,omitzero"`
	// CompiledBy is the build that compiled the bundle before publishing it
	// (admitfn push refuses a bundle that does not compile). A function of
	// the same build compiles each policy when a review first needs it
	// instead of all before serving; others compile all first. Optional.
	CompiledBy *Toolchain       `json:"compiledBy,omitempty"`
	Objects    []ManifestObject `json:"objects"`
	// Packed, when set, is the object at PackedKey holding every object of
	// Objects, in their order, with its documents parsed: functions read it
	// instead of the objects from a bucket (beside them from a directory),
	// and check each file it holds as they would the object. Optional.
	Packed *ManifestObject `json:"packed,omitempty"`
	// Retired are routes earlier bundles served and this one does not,
	// with the bundles that serve them for a transition. Optional.
	Retired []Retired `json:"retired,omitempty"`
	// Webhooks, when set, is the object at WebhooksKey: the webhook
	// configurations rendered for the bundle. Functions do not read it.
	Webhooks *ManifestObject `json:"webhooks,omitempty"`
}

// Toolchain names what compiles policies: admitfn's version and revision,
// and the Kubernetes and cel-go versions it embeds; and, for a build whose
// version and revision do not pin its source, the binary's Go build ID.
type Toolchain struct {
	Admitfn    string `json:"admitfn"`
	Revision   string `json:"revision,omitempty"`
	Kubernetes string `json:"kubernetes"`
	CEL        string `json:"cel"`
	Build      string `json:"build,omitempty"`
}

// ThisToolchain is the running binary's.
func ThisToolchain() Toolchain {
	v := version.Get()
	t := Toolchain{Admitfn: v.Version, Revision: v.Revision, Kubernetes: v.Kubernetes, CEL: v.CEL}
	if !t.pinned() {
		t.Build = buildID()
	}
	return t
}

// pinned reports whether t names one source: a release or module version,
// or a revision, neither of a tree with uncommitted changes ("-dirty",
// "+dirty", which any changes share), or else a build ID. Two builds
// without any of them ("(devel)" with no VCS stamp) may be any code.
func (t Toolchain) pinned() bool {
	if t.Build != "" {
		return true
	}
	dirty := func(s string) bool { return strings.HasSuffix(s, "-dirty") || strings.HasSuffix(s, "+dirty") }
	if dirty(t.Admitfn) || dirty(t.Revision) {
		return false
	}
	return t.Revision != "" || t.Admitfn != "" && t.Admitfn != "(devel)"
}

// IsThis reports whether t is set, names one source, and is the running
// binary's toolchain: what it compiled, and parsed, this binary would
// compile and parse alike.
func (t *Toolchain) IsThis() bool { return t != nil && t.pinned() && *t == ThisToolchain() }

// buildID is the Go build ID of the running executable, from its ELF note;
// "" when it has none (built with -buildid=) or cannot be read.
var buildID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	data, err := sec.Data()
	// namesz, descsz, type, then the name "Go\x00\x00" and the ID.
	if err != nil || len(data) < 16 || string(data[12:16]) != "Go\x00\x00" {
		return ""
	}
	n := binary.LittleEndian.Uint32(data[4:8])
	if uint64(len(data)) < 16+uint64(n) {
		return ""
	}
	return string(data[16 : 16+n])
})

// ManifestObject is one object of a bundle.
type ManifestObject struct {
	// Key is relative to the bundle's prefix, and is the file's name in the
	// bundle.
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Version pins the object where the store keeps versions.
	Version string `json:"version,omitempty"`
}

// envelope is the stored form: the manifest's exact bytes, and signatures
// over them.
type envelope struct {
	Manifest   json.RawMessage `json:"manifest"`
	Signatures []Signature     `json:"signatures,omitempty"`
}

// Signature is an ed25519 signature over the manifest's bytes.
type Signature struct {
	// KeyID names the public key: the first 16 hex digits of the sha256 of
	// its raw 32 bytes.
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// Errors about a manifest's integrity, matched with errors.Is.
var (
	// ErrUnsigned: a public key is configured but the bundle has no
	// signature (or no manifest to sign).
	ErrUnsigned = errors.New("bundle is not signed")
	// ErrBadSignature: no signature verifies with any configured key.
	ErrBadSignature = errors.New("bundle signature does not verify")
	// ErrIntegrity: an object does not match what the manifest says of it.
	ErrIntegrity = errors.New("bundle object does not match its manifest")
	// ErrInvalidManifest: the manifest is not one this version reads.
	ErrInvalidManifest = errors.New("invalid bundle manifest")
	// ErrWrongLocation: the manifest was published for another location.
	ErrWrongLocation = errors.New("bundle manifest was published for another location")
	// ErrExpired: the manifest's expiry has passed.
	ErrExpired = errors.New("bundle manifest has expired")
	// ErrRollback: the manifest is older than the one serving, or has its
	// serial with other objects.
	ErrRollback = errors.New("bundle manifest is not newer than the one serving")
	// ErrUnlisted: a directory holds a policy file its manifest does not
	// name.
	ErrUnlisted = errors.New("bundle directory holds a policy file its manifest does not name")
)

// Refused reports whether err is a refusal of a manifest for what it says or
// who signed it, as opposed to a store that could not be read: what an
// attacker with write access to the bucket, but no signing key, can cause.
func Refused(err error) bool {
	for _, e := range []error{ErrUnsigned, ErrBadSignature, ErrIntegrity, ErrInvalidManifest, ErrWrongLocation, ErrExpired, ErrRollback, ErrUnlisted} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Reason says in a few words, fit for a review's answer, why err, a
// fetch's error, left no bundle: which check refused the manifest, or that
// the store could not be read (also for nil: none was read yet). The log
// has err itself.
func Reason(err error) string {
	for _, r := range []struct {
		err  error
		what string
	}{
		{ErrUnsigned, "it is not signed, and the function requires a signature"},
		{ErrBadSignature, "its signature does not verify with the function's keys"},
		{ErrExpired, "its manifest has expired"},
		{ErrRollback, "it is older than the bundle the function served (a rollback)"},
		{ErrWrongLocation, "it was published for another location"},
		{ErrIntegrity, "an object does not match its manifest"},
		{ErrUnlisted, "the directory holds a policy file its manifest does not name"},
		{ErrInvalidManifest, "its manifest is not valid"},
	} {
		if errors.Is(err, r.err) {
			return "the policy bundle in the store was refused: " + r.what
		}
	}
	return "the policy store could not be read"
}

// KeyID names a public key in signatures.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// encode writes the envelope of m, signed with key when it is set. The
// manifest is indented for readers and signed exactly as written.
func encode(m *Manifest, key ed25519.PrivateKey) ([]byte, error) {
	body, err := json.MarshalIndent(m, "  ", "  ")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("{\n  \"manifest\": ")
	buf.Write(body)
	if key != nil {
		sig, err := json.Marshal([]Signature{{
			KeyID: KeyID(key.Public().(ed25519.PublicKey)),
			Sig:   base64.StdEncoding.EncodeToString(ed25519.Sign(key, body)),
		}})
		if err != nil {
			return nil, err
		}
		buf.WriteString(",\n  \"signatures\": ")
		buf.Write(sig)
	}
	buf.WriteString("\n}\n")
	return buf.Bytes(), nil
}

// decode reads an envelope, verifies its signature against keys (when any
// are configured) and checks the manifest's shape.
func decode(data []byte, keys []ed25519.PublicKey) (*Manifest, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	if len(env.Manifest) == 0 {
		return nil, fmt.Errorf("%w: no manifest field", ErrInvalidManifest)
	}
	if len(keys) > 0 {
		if err := verify(env, keys); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(env.Manifest))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	return &m, nil
}

func verify(env envelope, keys []ed25519.PublicKey) error {
	if len(env.Signatures) == 0 {
		return ErrUnsigned
	}
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			continue
		}
		for _, k := range keys {
			if s.KeyID == KeyID(k) && ed25519.Verify(k, env.Manifest, sig) {
				return nil
			}
		}
	}
	ids := make([]string, len(env.Signatures))
	for i, s := range env.Signatures {
		ids[i] = s.KeyID
	}
	return fmt.Errorf("%w (signed by key %s)", ErrBadSignature, strings.Join(ids, ", "))
}

func (m *Manifest) validate() error {
	if m.APIVersion != ManifestAPIVersion || m.Kind != ManifestKind {
		return fmt.Errorf("apiVersion %q, kind %q: want %s %s", m.APIVersion, m.Kind, ManifestAPIVersion, ManifestKind)
	}
	if m.Serial < 0 {
		return fmt.Errorf("serial %d is negative", m.Serial)
	}
	if len(m.Objects) == 0 {
		return errors.New("no objects")
	}
	seen := map[string]bool{}
	for _, o := range m.Objects {
		if !bundleKey(o.Key) {
			return fmt.Errorf("object key %q: not a policy file of a bundle (.yaml, .yml or .json, relative, not hidden)", o.Key)
		}
		if seen[o.Key] {
			return fmt.Errorf("object key %q listed twice", o.Key)
		}
		seen[o.Key] = true
		if err := o.validate(); err != nil {
			return err
		}
	}
	if p := m.Packed; p != nil {
		if p.Key != PackedKey {
			return fmt.Errorf("packed object key %q: want %s", p.Key, PackedKey)
		}
		if err := p.validate(); err != nil {
			return err
		}
	}
	if w := m.Webhooks; w != nil {
		if w.Key != WebhooksKey {
			return fmt.Errorf("webhooks object key %q: want %s", w.Key, WebhooksKey)
		}
		if err := w.validate(); err != nil {
			return err
		}
	}
	if len(m.Retired) > MaxRetired {
		return fmt.Errorf("%d bundles of retired routes: at most %d", len(m.Retired), MaxRetired)
	}
	routes := map[string]bool{}
	for _, r := range m.Retired {
		if err := r.validate(); err != nil {
			return err
		}
		for _, p := range r.Routes {
			if routes[p] {
				return fmt.Errorf("retired route %q listed twice", p)
			}
			routes[p] = true
		}
	}
	return nil
}

func (o ManifestObject) validate() error {
	if o.Size < 0 || o.Size > store.MaxObjectBytes {
		return fmt.Errorf("object %q: size %d out of range", o.Key, o.Size)
	}
	if b, err := hex.DecodeString(o.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("object %q: sha256 %q is not 64 hex digits", o.Key, o.SHA256)
	}
	return nil
}

// bundleKey reports whether key can be a file of a bundle, as
// policy.ReadFS would read it from a directory.
func bundleKey(key string) bool {
	if !store.ValidKey(key) || !policy.IsBundleFile(path.Base(key)) {
		return false
	}
	for _, part := range strings.Split(key, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// ParsePublicKeys reads the public keys a function trusts: PEM blocks
// ("PUBLIC KEY", as `openssl pkey -pubout` writes them), or raw 32-byte
// keys in base64, separated by commas or whitespace.
func ParsePublicKeys(s string) ([]ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var keys []ed25519.PublicKey
	if strings.Contains(s, "-----BEGIN") {
		rest := []byte(s)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "PUBLIC KEY" {
				return nil, fmt.Errorf("public key: PEM block %q: want PUBLIC KEY", block.Type)
			}
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public key: %w", err)
			}
			pub, ok := k.(ed25519.PublicKey)
			if !ok {
				return nil, fmt.Errorf("public key: %T is not an ed25519 key", k)
			}
			keys = append(keys, pub)
		}
		if len(bytes.TrimSpace(rest)) > 0 || len(keys) == 0 {
			return nil, errors.New("public key: text outside PEM blocks")
		}
		return keys, nil
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		raw, err := base64.StdEncoding.DecodeString(f)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("public key %q: want a PEM PUBLIC KEY or %d bytes in base64", short(f), ed25519.PublicKeySize)
		}
		keys = append(keys, ed25519.PublicKey(raw))
	}
	return keys, nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// ParsePrivateKey reads a PKCS #8 PEM ed25519 private key, as
// `openssl genpkey -algorithm ed25519` and `admitfn keygen` write it.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("signing key: want a PEM PRIVATE KEY block (PKCS #8)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key: %T is not an ed25519 key", k)
	}
	return priv, nil
}

// MarshalKeys writes a key pair as PEM: the private key in PKCS #8, the
// public key in PKIX.
func MarshalKeys(priv ed25519.PrivateKey) (privPEM, pubPEM []byte, err error) {
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pkix, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}), nil
}
