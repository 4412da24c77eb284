package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/hack/build/tarball"
	"github.com/admitfn/admitfn/hack/build/zipfile"
)

// The server image: one layer on nothing (no shell, no package manager),
// the static server at /admitfn-server running as 65532:65532, the example
// bundle at /policies, and an OCI image layout (one index naming the
// multi-arch image) as the tar that docker load, skopeo and crane read.

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	nonRoot       = "65532"
)

type ociImage struct {
	platform platform
	binary   []byte
	bundle   []policy.Source
	license  []byte
	notices  []byte
}

type ociMeta struct {
	version, revision, repository string
	created                       time.Time
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// blobs holds content by digest.
type blobs map[string][]byte

func (b blobs) add(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	b[d] = data
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

func writeOCILayout(w io.Writer, images []ociImage, meta ociMeta) error {
	store := blobs{}
	labels := map[string]string{
		"org.opencontainers.image.version":  meta.version,
		"org.opencontainers.image.revision": meta.revision,
		"org.opencontainers.image.source":   "https://github.com/admitfn/admitfn",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "admitfn-server",
		"org.opencontainers.image.created":  meta.created.Format(time.RFC3339),
	}
	var manifests []descriptor
	for _, img := range images {
		layerTar, err := img.layer(meta.created)
		if err != nil {
			return err
		}
		diffID := sha256.Sum256(layerTar)
		var gz bytes.Buffer
		if err := tarball.Gzip(&gz, layerTar); err != nil {
			return err
		}
		layer := store.add(mediaLayer, gz.Bytes())
		config, err := json.Marshal(map[string]any{
			"created":      meta.created.Format(time.RFC3339),
			"architecture": img.platform.arch,
			"os":           img.platform.os,
			"config": map[string]any{
				"User":         nonRoot + ":" + nonRoot,
				"Entrypoint":   []string{"/admitfn-server"},
				"Env":          []string{"ADMITFN_ADDR=:8080", "ADMITFN_POLICIES=/policies"},
				"ExposedPorts": map[string]any{"8080/tcp": map[string]any{}},
				"WorkingDir":   "/",
				"Labels":       labels,
			},
			"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
			"history": []map[string]any{{"created": meta.created.Format(time.RFC3339), "created_by": "make release " + meta.version}},
		})
		if err != nil {
			return err
		}
		cfg := store.add(mediaConfig, config)
		manifest, err := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     mediaManifest,
			"config":        cfg,
			"layers":        []descriptor{layer},
			"annotations":   labels,
		})
		if err != nil {
			return err
		}
		d := store.add(mediaManifest, manifest)
		d.Platform = &ociPlatform{Architecture: img.platform.arch, OS: img.platform.os}
		manifests = append(manifests, d)
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests, "annotations": labels})
	if err != nil {
		return err
	}
	image := store.add(mediaIndex, index)
	image.Annotations = map[string]string{
		"org.opencontainers.image.ref.name": meta.version,
		"io.containerd.image.name":          meta.repository + ":" + meta.version,
	}
	top, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{image}})
	if err != nil {
		return err
	}

	entries := []zipfile.Entry{
		{Name: "blobs/", Mode: 0o755},
		{Name: "blobs/sha256/", Mode: 0o755},
		{Name: "index.json", Mode: 0o644, Data: top},
		{Name: "oci-layout", Mode: 0o644, Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	}
	digests := make([]string, 0, len(store))
	for d := range store {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		entries = append(entries, zipfile.Entry{Name: "blobs/sha256/" + d[len("sha256:"):], Mode: 0o644, Data: store[d]})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return tarball.Write(w, entries, meta.created, false)
}

// layer is the image's one layer, uncompressed.
func (img ociImage) layer(mtime time.Time) ([]byte, error) {
	entries := []zipfile.Entry{
		{Name: "admitfn-server", Mode: 0o755, Data: img.binary},
		{Name: "etc/", Mode: 0o755},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:" + nonRoot + ":\n")},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + nonRoot + ":" + nonRoot + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{Name: "policies/", Mode: 0o755},
		{Name: "tmp/", Mode: 0o777},
		{Name: "usr/", Mode: 0o755},
		{Name: "usr/share/", Mode: 0o755},
		{Name: "usr/share/doc/", Mode: 0o755},
		{Name: "usr/share/doc/admitfn/", Mode: 0o755},
		{Name: "usr/share/doc/admitfn/LICENSE", Mode: 0o644, Data: img.license},
		{Name: "usr/share/doc/admitfn/THIRD_PARTY_NOTICES.md", Mode: 0o644, Data: img.notices},
	}
	dirs := map[string]bool{}
	for _, s := range img.bundle {
		for dir := parentDir(s.Name); dir != ""; dir = parentDir(dir) {
			dirs["policies/"+dir+"/"] = true
		}
		entries = append(entries, zipfile.Entry{Name: "policies/" + s.Name, Mode: 0o644, Data: s.Data})
	}
	for d := range dirs {
		entries = append(entries, zipfile.Entry{Name: d, Mode: 0o755})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	var buf bytes.Buffer
	if err := tarball.Write(&buf, entries, mtime, false); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

func parentDir(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return ""
}
