package main

import (
	"archive/zip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/test/doccheck"
)

// TestReleaseArtifacts checks what make release-check built (the
// linux/amd64 variant of make release) as a user would meet it: checksums
// and signature verified with sha256sum and openssl, the CLI archive
// unpacked and run without Go, the Lambda bootstrap run, the Cloud
// Functions source and the OCI image opened, every SBOM read.
func TestReleaseArtifacts(t *testing.T) {
	dir := releaseDir(t)
	versionLine := regexp.MustCompile(`^admitfn v0\.0\.0-ci \(revision [0-9a-f]{40}(-dirty)?, Kubernetes v1\.37\.2, go1\.\d+(\.\d+)?\)\n$`)
	sh := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// Download and verify, as docs/install.md says.
	sums := sh(dir, nil, "sha256sum", "-c", "SHA256SUMS")
	want := []string{
		"admitfn-gcf-source_" + version + ".zip", "admitfn-lambda_" + version + "_amd64.zip",
		"admitfn-server_" + version + "_oci.tar", "admitfn_" + version + "_linux_amd64.tar.gz",
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(sums), "\n") {
		name, ok := strings.CutSuffix(line, ": OK")
		if !ok {
			t.Errorf("sha256sum: %s", line)
		}
		listed = append(listed, name)
	}
	var wantListed []string
	for _, a := range want {
		wantListed = append(wantListed, a, a+".cdx.json")
	}
	slices.Sort(wantListed)
	if !slices.Equal(listed, wantListed) {
		t.Errorf("SHA256SUMS lists %v, want %v", listed, wantListed)
	}
	if key := os.Getenv("ADMITFN_RELEASE_KEY"); key != "" {
		if out := sh(dir, nil, "openssl", "pkeyutl", "-verify", "-pubin", "-inkey", key, "-rawin", "-in", "SHA256SUMS", "-sigfile", "SHA256SUMS.sig"); out != "Signature Verified Successfully\n" {
			t.Errorf("openssl verify: %q", out)
		}
	}

	// The CLI archive, unpacked, runs the example tests with no Go around.
	unpacked := t.TempDir()
	sh(unpacked, nil, "tar", "xzf", filepath.Join(dir, "admitfn_"+version+"_linux_amd64.tar.gz"))
	top := filepath.Join(unpacked, "admitfn_"+version+"_linux_amd64")
	noGo := []string{"PATH=/usr/bin:/bin", "HOME=" + unpacked}
	if _, err := exec.Command("sh", "-c", "PATH=/usr/bin:/bin command -v go").Output(); err == nil {
		t.Fatal("go is on /usr/bin:/bin: the archive would not be run without Go")
	}
	if out := sh(top, noGo, "./admitfn", "version"); !versionLine.MatchString(out) {
		t.Errorf("admitfn version: %q", out)
	}
	out := sh(top, noGo, "./admitfn", "test", "examples")
	if !strings.HasSuffix(out, "PASS: 5 cases\n") || !strings.HasPrefix(out, "ok   examples/examples_test.yaml: ") {
		t.Errorf("admitfn test examples:\n%s", out)
	}
	sh(top, noGo, "./admitfn", "lint", "-p", "examples")
	for _, f := range []string{"LICENSE", "README.md", "CHANGELOG.md", "THIRD_PARTY_NOTICES.md"} {
		if _, err := os.Stat(filepath.Join(top, f)); err != nil {
			t.Error(err)
		}
	}
	checkNotices(t, filepath.Join(top, "THIRD_PARTY_NOTICES.md"), "k8s.io/apiserver v0.37.2: Apache-2.0", "github.com/spf13/cobra v1.10.2: Apache-2.0")

	// The Lambda zip: a bootstrap that runs, its licence and notices.
	lambda := filepath.Join(t.TempDir(), "lambda")
	files := unzip(t, filepath.Join(dir, "admitfn-lambda_"+version+"_amd64.zip"), lambda)
	if !slices.Equal(files, []string{"LICENSE", "THIRD_PARTY_NOTICES.md", "bootstrap"}) {
		t.Errorf("lambda zip holds %v", files)
	}
	if out := sh(lambda, noGo, "./bootstrap", "--version"); !versionLine.MatchString(out) {
		t.Errorf("bootstrap --version: %q", out)
	}
	checkNotices(t, filepath.Join(lambda, "THIRD_PARTY_NOTICES.md"), "github.com/aws/aws-lambda-go v1.55.1: Apache-2.0, MIT-0")

	// The Cloud Functions source: buildable alone, stamped, the bundle
	// without test files.
	gcf := filepath.Join(t.TempDir(), "gcf")
	files = unzip(t, filepath.Join(dir, "admitfn-gcf-source_"+version+".zip"), gcf)
	for _, f := range []string{"go.mod", "function.go", "vendor/modules.txt", "core/version/release.go", "LICENSE", "THIRD_PARTY_NOTICES.md", "policies/01-basic.yaml"} {
		if !slices.Contains(files, f) {
			t.Errorf("the Cloud Functions source lacks %s", f)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.yaml") {
			t.Errorf("the Cloud Functions source holds the test file %s", f)
		}
	}

	// The server image: skopeo reads it, copies it (checking every
	// digest), and its one layer holds a static server running as
	// non-root, with no shell.
	image := "oci-archive:" + filepath.Join(dir, "admitfn-server_"+version+"_oci.tar") + ":" + version
	var config struct {
		Architecture, OS string
		Config           struct {
			User       string
			Entrypoint []string
			Env        []string
		}
	}
	if err := json.Unmarshal([]byte(sh(dir, nil, "skopeo", "inspect", "--config", image)), &config); err != nil {
		t.Fatal(err)
	}
	if config.Architecture != "amd64" || config.OS != "linux" || config.Config.User != "65532:65532" || !slices.Equal(config.Config.Entrypoint, []string{"/admitfn-server"}) ||
		!slices.Equal(config.Config.Env, []string{"ADMITFN_ADDR=:8080", "ADMITFN_POLICIES=/policies"}) {
		t.Errorf("image config: %+v", config)
	}
	// The layout names the image for docker load as docs/install.md says.
	index := sh(dir, nil, "tar", "xOf", "admitfn-server_"+version+"_oci.tar", "index.json")
	if !strings.Contains(index, `"io.containerd.image.name":"docker.io/admitfn/admitfn-server:`+version+`"`) || !strings.Contains(index, `"org.opencontainers.image.ref.name":"`+version+`"`) {
		t.Errorf("index.json names no image: %s", index)
	}
	copied := filepath.Join(t.TempDir(), "image")
	sh(dir, nil, "skopeo", "copy", "--quiet", image, "dir:"+copied)
	var manifest struct{ Layers []struct{ Digest string } }
	raw, err := os.ReadFile(filepath.Join(copied, "manifest.json"))
	if err != nil || json.Unmarshal(raw, &manifest) != nil || len(manifest.Layers) != 1 {
		t.Fatalf("copied manifest: %v %s", err, raw)
	}
	rootfs := t.TempDir()
	sh(rootfs, nil, "tar", "xzf", filepath.Join(copied, strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:")))
	for _, absent := range []string{"bin/sh", "bin", "usr/bin"} {
		if _, err := os.Stat(filepath.Join(rootfs, absent)); err == nil {
			t.Errorf("the image has %s", absent)
		}
	}
	if out := sh(rootfs, noGo, "./admitfn-server", "--version"); !versionLine.MatchString(out) {
		t.Errorf("admitfn-server -version: %q", out)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "policies", "examples_test.yaml")); err == nil {
		t.Error("the image's bundle holds the test file")
	}

	// An SBOM per artifact, naming the release and what it links.
	for _, a := range want {
		var bom struct {
			BOMFormat string
			Metadata  struct {
				Component struct{ Name, Version string }
			}
			Components []struct{ Name, Version, Purl string }
		}
		raw, err := os.ReadFile(filepath.Join(dir, a+".cdx.json"))
		if err != nil || json.Unmarshal(raw, &bom) != nil {
			t.Fatalf("%s.cdx.json: %v", a, err)
		}
		found := false
		for _, c := range bom.Components {
			found = found || c.Purl == "pkg:golang/k8s.io/apiserver@v0.37.2?goarch=amd64&goos=linux&type=module"
		}
		if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != version || !found {
			t.Errorf("%s.cdx.json: format %q, version %q, k8s.io/apiserver listed: %v", a, bom.BOMFormat, bom.Metadata.Component.Version, found)
		}
	}
}

// version is the one make release-check stamps.
const version = "v0.0.0-ci"

// releaseDir is where make release-check put the artifacts.
func releaseDir(t *testing.T) string {
	dir := os.Getenv("ADMITFN_RELEASE_DIR")
	if dir == "" {
		if os.Getenv("ADMITFN_RELEASE_TESTS") == "required" {
			t.Fatal("ADMITFN_RELEASE_DIR is not set")
		}
		t.Skip("ADMITFN_RELEASE_DIR is not set: make release-check builds the artifacts and runs this")
	}
	return dir
}

// docs/install.md's steps and the README's, run as written against the
// release, each from one directory, without Go, V set as the first step
// sets it: curl -LO copies the file from the release, the version is the
// release's, sudo install only checks its file, and the registry skopeo
// copies to is a directory. Every comment in a step is output it must
// print.
func TestInstallDocs(t *testing.T) {
	dir := releaseDir(t)
	key := os.Getenv("ADMITFN_RELEASE_KEY")
	if key == "" {
		t.Fatal("ADMITFN_RELEASE_KEY is not set: the signature step needs the release's public key")
	}
	work, registry := t.TempDir(), t.TempDir()
	pub, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key comes from the repository, and the docs check its
	// fingerprint; the release checked here is signed with a key made for
	// the check, which takes its place for the signature step.
	repoKey, err := filepath.Abs("../../" + ReleaseKey)
	if err != nil {
		t.Fatal(err)
	}
	const stand = `set -eu
curl() { [ "$1" = -LO ] || return 1; case "$2" in */docs/admitfn-release.pub) cp "$REPO_KEY" .;; *) cp "$RELEASE/${2##*/}" .;; esac; }
sudo() { [ "$1" = install ] && [ -x "$2" ]; }
`
	fill := strings.NewReplacer("v0.1.0", version, "docker://registry.example.com/", "dir:"+registry+"/")
	comment := regexp.MustCompile(`(?m)(?:^|\s)# (.+)$`)
	repoPub, err := os.ReadFile(repoKey)
	if err != nil {
		t.Fatal(err)
	}
	// The release's notes name the key it was signed with: the check's, in
	// the place of the repository's.
	notesFill := strings.NewReplacer(fingerprint(t, repoPub), fingerprint(t, pub))
	for _, step := range append(doccheck.Find(t, "docs/install.md", 6), doccheck.Find(t, "README.md", 1)...) {
		if strings.Contains(step.Text, "RELEASE-NOTES.md") {
			step.Text = notesFill.Replace(step.Text)
		}
		if strings.Contains(step.Text, "pkeyutl -verify") {
			if err := os.WriteFile(filepath.Join(work, "admitfn-release.pub"), pub, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("sh", "-c", stand+fill.Replace(step.Text))
		cmd.Dir, cmd.Env = work, []string{"PATH=/usr/bin:/bin", "HOME=" + work, "RELEASE=" + dir, "V=" + version, "REPO_KEY=" + repoKey}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", step, err, out)
			continue
		}
		for _, c := range comment.FindAllStringSubmatch(fill.Replace(step.Text), -1) {
			if !strings.Contains(string(out), c[1]) {
				t.Errorf("%s: the step says it prints %q; it printed:\n%s", step, c[1], out)
			}
		}
	}
}

func checkNotices(t *testing.T, path string, lines ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if !strings.Contains(string(data), "\n- "+l+"\n") {
			t.Errorf("%s does not list %q", path, l)
		}
	}
}

// unzip extracts the archive into dir and lists its files.
func unzip(t *testing.T, archive, dir string) []string {
	t.Helper()
	zr, err := zip.OpenReader(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, f.UncompressedSize64)
		_, err = io.ReadFull(rc, data)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, f.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// fingerprint is the sha256 of a PEM public key's 32 raw bytes, in hex.
func fingerprint(t *testing.T, pem []byte) string {
	t.Helper()
	keys, err := bundle.ParsePublicKeys(string(pem))
	if err != nil || len(keys) != 1 {
		t.Fatalf("want one public key: %v", err)
	}
	sum := sha256.Sum256(keys[0])
	return hex.EncodeToString(sum[:])
}

// The release key's fingerprint in docs/install.md is the committed key's,
// in both places: beside the key, and as the release notes give it.
func TestReleaseKeyFingerprint(t *testing.T) {
	pem, err := os.ReadFile("../../" + ReleaseKey)
	if err != nil {
		t.Fatal(err)
	}
	fp := fingerprint(t, pem)
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# " + fp + "  -\n", "# fingerprint " + fp + "\n"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/install.md does not give the fingerprint of %s: %s", ReleaseKey, want)
		}
	}
}

// The release notes make release writes give the fingerprint of the key it
// signs with, which users compare with the repository's.
func TestReleaseNotesGiveTheKeyFingerprint(t *testing.T) {
	dir := releaseDir(t)
	notes, err := os.ReadFile(filepath.Join(dir, NotesFile))
	if err != nil {
		t.Fatal(err)
	}
	key := os.Getenv("ADMITFN_RELEASE_KEY")
	pub, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nfingerprint " + fingerprint(t, pub) + "\n"; !strings.Contains(string(notes), want) || !strings.HasPrefix(string(notes), "admitfn "+version+"\n") {
		t.Errorf("%s:\n%s\nwant the version and %q", NotesFile, notes, want)
	}
}

// make release signs only with the pair of the committed release key.
func TestReleaseRefusesAnotherSigningKey(t *testing.T) {
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, _, err := bundle.MarshalKeys(other)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &release{version: "v0.0.1", releaseKey: "../../" + ReleaseKey, out: t.TempDir(), ctx: context.Background()}
	err = r.run(keyFile)
	pem, _ := os.ReadFile("../../" + ReleaseKey)
	keys, _ := bundle.ParsePublicKeys(string(pem))
	want := "-sign-key " + keyFile + " is key " + bundle.KeyID(other.Public().(ed25519.PublicKey)) + ", not the release key " + bundle.KeyID(keys[0]) + " (../../" + ReleaseKey + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}
