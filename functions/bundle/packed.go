package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// PackedKey is where Publish, asked to, writes the packed form of a bundle:
// every file of it in one object, with each file's documents as JSON
// (policy.Documents). A function reads it in one request instead of one
// per file, and parses no YAML when the manifest's compiledBy is its own
// toolchain (the documents are what its own policy.Documents would make).
const PackedKey = ".admitfn/packed.json"

// packed is the packed form. Files are in the manifest's order.
type packed struct {
	Files []packedFile `json:"files"`
}

type packedFile struct {
	Name string `json:"name"`
	// Data is the file, byte for byte (base64 in JSON, so any bytes
	// survive).
	Data []byte `json:"data"`
	// Documents are policy.Documents of Data; null for a document that
	// holds only comments.
	Documents []json.RawMessage `json:"documents"`
}

// jsonNull is a comment-only document in the packed form.
var jsonNull = []byte("null")

// pack makes the packed form of sources, in their order; a file that does
// not split into documents is an error (Publish is given bundles that
// parse).
func pack(sources []policy.Source) ([]byte, error) {
	p := packed{Files: make([]packedFile, len(sources))}
	for i, s := range sources {
		docs, err := policy.Documents(s.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		raw := make([]json.RawMessage, len(docs))
		for j, d := range docs {
			raw[j] = d
			if d == nil {
				raw[j] = jsonNull
			}
		}
		p.Files[i] = packedFile{Name: s.Name, Data: s.Data, Documents: raw}
	}
	return json.Marshal(p)
}

// readPacked reads the bundle from the packed object m names, checked as
// the files it holds would be: its own size and sha256, then each file's
// name, size and sha256 against the manifest's objects. The files carry
// their documents only when withDocuments.
func (f *Fetcher) readPacked(ctx context.Context, m *Manifest, check func(i int, data []byte) error, withDocuments bool) ([]policy.Source, error) {
	o := m.Packed
	data, err := f.Bucket.GetVersion(ctx, o.Key, o.Version)
	if err != nil {
		return nil, err
	}
	if err := checkObject(*o, data); err != nil {
		return nil, err
	}
	var p packed
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", o.Key, ErrIntegrity, err)
	}
	if len(p.Files) != len(m.Objects) {
		return nil, fmt.Errorf("%s: %w: %d files, manifest names %d", o.Key, ErrIntegrity, len(p.Files), len(m.Objects))
	}
	sources := make([]policy.Source, len(p.Files))
	for i, pf := range p.Files {
		if pf.Name != m.Objects[i].Key {
			return nil, fmt.Errorf("%s: %w: file %d is %q, manifest says %q", o.Key, ErrIntegrity, i+1, pf.Name, m.Objects[i].Key)
		}
		if err := check(i, pf.Data); err != nil {
			return nil, err
		}
		sources[i] = policy.Source{Name: pf.Name, Data: pf.Data}
		if withDocuments {
			docs := make([][]byte, len(pf.Documents))
			for j, d := range pf.Documents {
				if !bytes.Equal(d, jsonNull) {
					docs[j] = d
				}
			}
			sources[i].Documents = docs
		}
	}
	return sources, nil
}

// checkObject checks data against what the manifest says of it.
func checkObject(o ManifestObject, data []byte) error {
	if int64(len(data)) != o.Size {
		return fmt.Errorf("%s: %w: %d bytes, manifest says %d", o.Key, ErrIntegrity, len(data), o.Size)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != o.SHA256 {
		return fmt.Errorf("%s: %w: sha256 %s, manifest says %s", o.Key, ErrIntegrity, hex.EncodeToString(sum[:]), o.SHA256)
	}
	return nil
}

// putObject stores data at key and describes it for the manifest.
func putObject(ctx context.Context, bucket store.Bucket, key string, data []byte, contentType string) (ManifestObject, error) {
	obj, err := bucket.Put(ctx, key, data, contentType)
	if err != nil {
		return ManifestObject{}, fmt.Errorf("upload %s: %w", key, err)
	}
	sum := sha256.Sum256(data)
	return ManifestObject{Key: key, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Version: obj.Version}, nil
}
