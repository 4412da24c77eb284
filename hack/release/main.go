// Command release builds admitfn's release artifacts offline and
// reproducibly (make release): CLI archives, the Lambda zips, the Cloud
// Functions source zip and the server as an OCI image layout, each with its
// third-party notices and a CycloneDX SBOM, and SHA256SUMS over them all,
// signed when a key is given. Two runs on one commit give the same bytes.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/hack/build/gcfsource"
	"github.com/admitfn/admitfn/hack/build/lambdabuild"
	"github.com/admitfn/admitfn/hack/build/notices"
	"github.com/admitfn/admitfn/hack/build/tarball"
	"github.com/admitfn/admitfn/hack/build/zipfile"
)

type platform struct{ os, arch string }

var (
	cliPlatforms    = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}
	lambdaArchs     = []string{"arm64", "amd64"}
	imagePlatforms  = []platform{{"linux", "amd64"}, {"linux", "arm64"}}
	quickPlatform   = platform{"linux", "amd64"}
	examplesDir     = "policies/examples"
	versionPackage  = "github.com/admitfn/admitfn/core/version"
	serverPackage   = "./functions/server"
	cliPackage      = "./cmd/admitfn"
	imageRepository = "docker.io/admitfn/admitfn-server"
)

type release struct {
	repo, out     string
	version, rev  string
	mtime         time.Time
	ldflags       string
	modcache, cdx string
	quick         bool
	artifacts     []string // file names in out
	ctx           context.Context
	signKey       ed25519.PrivateKey
	releaseKey    string // the public key file signKey must match
	license       []byte // LICENSE, which every artifact carries
}

// ReleaseKey is the public key releases are signed with, committed with
// the source; docs/install.md gives its fingerprint.
const ReleaseKey = "docs/admitfn-release.pub"

func main() {
	r := &release{ctx: context.Background()}
	flag.StringVar(&r.version, "version", "", "the release version, v0.1.0 (required)")
	flag.StringVar(&r.out, "out", "dist/release", "output directory (emptied first)")
	flag.StringVar(&r.cdx, "cyclonedx-gomod", "cyclonedx-gomod", "the SBOM generator")
	flag.BoolVar(&r.quick, "quick", false, "linux/amd64 only: the CI variant")
	signKey := flag.String("sign-key", "", "ed25519 private key (PKCS #8 PEM, as admitfn keygen makes) to sign SHA256SUMS with")
	flag.StringVar(&r.releaseKey, "release-key", ReleaseKey, "the public key the signing key must be the pair of: the one docs/install.md tells users to verify with")
	flag.Parse()
	if err := r.run(*signKey); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func (r *release) run(signKey string) error {
	if !strings.HasPrefix(r.version, "v") || strings.ContainsAny(r.version, " /") {
		return fmt.Errorf("-version must be a version such as v0.1.0, not %q", r.version)
	}
	var err error
	if r.repo, err = os.Getwd(); err != nil {
		return err
	}
	if signKey != "" {
		data, err := os.ReadFile(signKey)
		if err != nil {
			return err
		}
		if r.signKey, err = bundle.ParsePrivateKey(data); err != nil {
			return fmt.Errorf("%s: %w", signKey, err)
		}
		// A signature users cannot check against the key they were told
		// to trust protects nothing: sign with the pair of that key only.
		key, err := r.publicKey()
		if err != nil {
			return err
		}
		if have := r.signKey.Public().(ed25519.PublicKey); !have.Equal(key) {
			return fmt.Errorf("-sign-key %s is key %s, not the release key %s (%s)", signKey, bundle.KeyID(have), bundle.KeyID(key), r.releaseKey)
		}
	}
	if r.license, err = os.ReadFile(filepath.Join(r.repo, "LICENSE")); err != nil {
		return err
	}
	r.rev, r.mtime = sourceStamp(r.repo)
	r.ldflags = fmt.Sprintf("-s -w -buildid= -X %s.release=%s -X %s.releaseRevision=%s", versionPackage, r.version, versionPackage, r.rev)
	mc, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return err
	}
	r.modcache = strings.TrimSpace(string(mc))
	if err := os.RemoveAll(r.out); err != nil {
		return err
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "admitfn-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	clis, lambdas, images := cliPlatforms, lambdaArchs, imagePlatforms
	if r.quick {
		clis, lambdas, images = []platform{quickPlatform}, []string{quickPlatform.arch}, []platform{quickPlatform}
	}
	for _, p := range clis {
		if err := r.cliArchive(work, p); err != nil {
			return err
		}
	}
	for _, arch := range lambdas {
		if err := r.lambdaZip(work, arch); err != nil {
			return err
		}
	}
	if err := r.gcfSource(work); err != nil {
		return err
	}
	if err := r.serverImage(work, images); err != nil {
		return err
	}
	if err := r.checksums(); err != nil {
		return err
	}
	return r.notes()
}

// NotesFile is the release notes make release writes: the GitHub release's
// notes and the signed tag's message (CONTRIBUTING.md, "Releasing"). They
// give the release key's fingerprint a second place, which a change to the
// repository alone cannot change; docs/install.md checks both.
const NotesFile = "RELEASE-NOTES.md"

// publicKey reads the release key, the one docs/install.md tells users to
// verify with.
func (r *release) publicKey() (ed25519.PublicKey, error) {
	pub, err := os.ReadFile(r.releaseKey)
	if err != nil {
		return nil, err
	}
	keys, err := bundle.ParsePublicKeys(string(pub))
	if err != nil || len(keys) != 1 {
		return nil, fmt.Errorf("%s: want one ed25519 public key: %v", r.releaseKey, err)
	}
	return keys[0], nil
}

// notes writes NotesFile, with the fingerprint of the release key.
func (r *release) notes() error {
	key, err := r.publicKey()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(key)
	text := fmt.Sprintf("admitfn %s\n\nSHA256SUMS is signed by the release key (docs/admitfn-release.pub), key id %s,\nfingerprint %s\n(the sha256 of its 32 raw bytes; docs/install.md says how to check it).\n",
		r.version, bundle.KeyID(key), hex.EncodeToString(sum[:]))
	fmt.Printf("release: %s\n", filepath.Join(r.out, NotesFile))
	return os.WriteFile(filepath.Join(r.out, NotesFile), []byte(text), 0o644)
}

// sourceStamp is the revision and commit time of the checkout (with -dirty
// for local changes); SOURCE_DATE_EPOCH overrides the time. Outside git:
// "unknown" and 1980-01-01, the zip epoch.
func sourceStamp(repo string) (string, time.Time) {
	mtime := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	rev := "unknown"
	if out, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			rev += "-dirty"
		}
		if out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%ct").Output(); err == nil {
			if s, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
				mtime = time.Unix(s, 0).UTC()
			}
		}
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			mtime = time.Unix(s, 0).UTC()
		}
	}
	return rev, mtime
}

// build compiles pkg for p into binary: static, no paths, no build id.
func (r *release) build(pkg string, p platform, binary string, tags ...string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", r.ldflags, "-o", binary}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(r.ctx, "go", append(args, pkg)...)
	cmd.Dir = r.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch, "GOFLAGS=")
	fmt.Printf("release: go build %s for %s/%s\n", pkg, p.os, p.arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %v\n%s", pkg, p.os, p.arch, err, out)
	}
	return nil
}

// noticesFor classifies the modules of a binary (or of packages, for a
// source artifact) and renders the notices file; an incompatible licence
// fails the release.
func (r *release) noticesFor(artifact string, mods []notices.Module) ([]byte, error) {
	mods, err := notices.Classify(r.modcache, mods)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", artifact, err)
	}
	var b bytes.Buffer
	if err := notices.Write(&b, artifact, mods); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// binaryAndNotices reads a built binary and renders its notices.
func (r *release) binaryAndNotices(artifact, binary string) (data, text []byte, err error) {
	if data, err = os.ReadFile(binary); err != nil {
		return nil, nil, err
	}
	mods, err := notices.FromBinary(binary)
	if err != nil {
		return nil, nil, err
	}
	text, err = r.noticesFor(artifact, mods)
	return data, text, err
}

// docs are the files every archive carries beside its binary.
func (r *release) docs(noticesText []byte) ([]zipfile.Entry, error) {
	entries := []zipfile.Entry{{Name: "LICENSE", Mode: 0o644, Data: r.license}}
	for _, name := range []string{"README.md", "CHANGELOG.md"} {
		data, err := os.ReadFile(filepath.Join(r.repo, name))
		if err != nil {
			return nil, err
		}
		entries = append(entries, zipfile.Entry{Name: name, Mode: 0o644, Data: data})
	}
	return append(entries, zipfile.Entry{Name: "THIRD_PARTY_NOTICES.md", Mode: 0o644, Data: noticesText}), nil
}

// examples is the example bundle with its test file, for `admitfn test
// examples` straight from the archive.
func (r *release) examples(prefix string) ([]zipfile.Entry, error) {
	var entries []zipfile.Entry
	root := filepath.Join(r.repo, examplesDir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, zipfile.Entry{Name: prefix + filepath.ToSlash(rel), Mode: 0o644, Data: data})
		return nil
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, err
}

func (r *release) cliArchive(work string, p platform) error {
	name := fmt.Sprintf("admitfn_%s_%s_%s", r.version, p.os, p.arch)
	exe := "admitfn"
	if p.os == "windows" {
		exe += ".exe"
	}
	binary := filepath.Join(work, name, exe)
	if err := r.build(cliPackage, p, binary); err != nil {
		return err
	}
	data, text, err := r.binaryAndNotices(name, binary)
	if err != nil {
		return err
	}
	docs, err := r.docs(text)
	if err != nil {
		return err
	}
	examples, err := r.examples("examples/")
	if err != nil {
		return err
	}
	entries := append([]zipfile.Entry{{Name: exe, Mode: 0o755, Data: data}}, docs...)
	entries = append(entries, examples...)
	var buf bytes.Buffer
	file := name + ".tar.gz"
	if p.os == "windows" {
		file = name + ".zip"
		for i := range entries {
			entries[i].Name = name + "/" + entries[i].Name
		}
		err = zipfile.Write(&buf, entries)
	} else {
		all := []zipfile.Entry{{Name: name + "/", Mode: 0o755}, {Name: name + "/examples/", Mode: 0o755}}
		for _, e := range entries {
			e.Name = name + "/" + e.Name
			all = append(all, e)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].Name < all[j].Name })
		err = tarball.Write(&buf, all, r.mtime, true)
	}
	if err != nil {
		return err
	}
	if err := r.write(file, buf.Bytes()); err != nil {
		return err
	}
	return r.sbom(file, "bin", binary)
}

func (r *release) lambdaZip(work, arch string) error {
	name := fmt.Sprintf("admitfn-lambda_%s_%s", r.version, arch)
	binary := filepath.Join(work, name, "bootstrap")
	if err := lambdabuild.BuildWith(r.ctx, lambdabuild.Package, arch, binary, r.ldflags); err != nil {
		return err
	}
	data, text, err := r.binaryAndNotices(name, binary)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := zipfile.Write(&buf, []zipfile.Entry{
		{Name: "bootstrap", Mode: 0o755, Data: data},
		{Name: "LICENSE", Mode: 0o644, Data: r.license},
		{Name: "THIRD_PARTY_NOTICES.md", Mode: 0o644, Data: text},
	}); err != nil {
		return err
	}
	if err := r.write(name+".zip", buf.Bytes()); err != nil {
		return err
	}
	return r.sbom(name+".zip", "bin", binary)
}

func (r *release) gcfSource(work string) error {
	name := fmt.Sprintf("admitfn-gcf-source_%s", r.version)
	fmt.Printf("release: Cloud Functions source, dependencies vendored\n")
	mods, err := notices.FromPackages(r.repo, append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS="), gcfsource.Function)
	if err != nil {
		return err
	}
	text, err := r.noticesFor(name, mods)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	extra := map[string][]byte{
		"LICENSE":                 r.license,
		"THIRD_PARTY_NOTICES.md":  text,
		"core/version/release.go": []byte(fmt.Sprintf("package version\n\n// Stamped by make release: Cloud Functions builds this source itself.\nfunc init() { release, releaseRevision = %q, %q }\n", r.version, r.rev)),
	}
	if err := gcfsource.WriteWith(r.ctx, r.repo, filepath.Join(r.repo, examplesDir), &buf, extra); err != nil {
		return err
	}
	if err := r.write(name+".zip", buf.Bytes()); err != nil {
		return err
	}
	// The SBOM of the function as Cloud Functions builds it.
	binary := filepath.Join(work, name, "function")
	if err := r.build("./functions/gcf/runner", quickPlatform, binary); err != nil {
		return err
	}
	return r.sbom(name+".zip", "bin", binary)
}

func (r *release) serverImage(work string, platforms []platform) error {
	name := fmt.Sprintf("admitfn-server_%s_oci", r.version)
	var images []ociImage
	for _, p := range platforms {
		binary := filepath.Join(work, name, p.arch, "admitfn-server")
		if err := r.build(serverPackage, p, binary, "admitfn_fallbackroots"); err != nil {
			return err
		}
		data, text, err := r.binaryAndNotices(name, binary)
		if err != nil {
			return err
		}
		bundleFiles, err := policy.ReadFS(os.DirFS(filepath.Join(r.repo, examplesDir)), ".")
		if err != nil {
			return err
		}
		images = append(images, ociImage{platform: p, binary: data, bundle: bundleFiles, license: r.license, notices: text})
		if p == quickPlatform {
			if err := r.sbom(name+".tar", "bin", binary); err != nil {
				return err
			}
		}
	}
	var buf bytes.Buffer
	if err := writeOCILayout(&buf, images, ociMeta{version: r.version, revision: r.rev, created: r.mtime, repository: imageRepository}); err != nil {
		return err
	}
	return r.write(name+".tar", buf.Bytes())
}

// sbom writes artifact.cdx.json: a CycloneDX SBOM of the binary the
// artifact ships (or builds), without serial or timestamp so that it is
// reproducible.
func (r *release) sbom(artifact, mode, binary string) error {
	out := filepath.Join(r.out, artifact+".cdx.json")
	cmd := exec.CommandContext(r.ctx, r.cdx, mode, "-json", "-noserial", "-notimestamp", "-version", r.version, "-output", out, binary)
	cmd.Dir = r.repo
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("SBOM of %s: %v\n%s", artifact, err, msg)
	}
	r.artifacts = append(r.artifacts, artifact+".cdx.json")
	return nil
}

func (r *release) write(name string, data []byte) error {
	fmt.Printf("release: %s (%.1f MiB)\n", filepath.Join(r.out, name), float64(len(data))/(1<<20))
	r.artifacts = append(r.artifacts, name)
	return os.WriteFile(filepath.Join(r.out, name), data, 0o644)
}

// checksums writes SHA256SUMS (sha256sum -c reads it) and, with a key, its
// detached ed25519 signature SHA256SUMS.sig (raw, as openssl pkeyutl
// -verify -rawin reads it).
func (r *release) checksums() error {
	sort.Strings(r.artifacts)
	var b bytes.Buffer
	for _, name := range r.artifacts {
		data, err := os.ReadFile(filepath.Join(r.out, name))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	if err := os.WriteFile(filepath.Join(r.out, "SHA256SUMS"), b.Bytes(), 0o644); err != nil {
		return err
	}
	if r.signKey != nil {
		sig := ed25519.Sign(r.signKey, b.Bytes())
		if err := os.WriteFile(filepath.Join(r.out, "SHA256SUMS.sig"), sig, 0o644); err != nil {
			return err
		}
		fmt.Printf("release: SHA256SUMS signed by key %s\n", bundle.KeyID(r.signKey.Public().(ed25519.PublicKey)))
	}
	fmt.Printf("release: %d artifacts in %s, SHA256SUMS\n", len(r.artifacts), r.out)
	return nil
}
