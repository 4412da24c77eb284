package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/admitfn/admitfn/core/policy"
)

// Dir is a bundle in a local directory: baked into a deployment, mounted
// into a container (a ConfigMap volume, whose files are symbolic links), or
// the target of `admitfn push` for inspection. It lists and reads exactly
// the files policy.WalkFS finds, as the CLI does.
type Dir struct {
	root string
	fsys fs.FS
}

var _ Bucket = (*Dir)(nil)

// NewDir returns the bucket of directory root.
func NewDir(root string) *Dir { return &Dir{root: root, fsys: os.DirFS(root)} }

// OpenDir returns the bucket of directory root, which must exist unless
// create is set, when it is made (a push target).
func OpenDir(root string, create bool) (*Dir, error) {
	if create {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		}
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", root)
	}
	return NewDir(root), nil
}

func (d *Dir) Location() string { return d.root }

func (d *Dir) path(key string) (string, error) {
	if !ValidKey(key) {
		return "", fmt.Errorf("invalid object key %q", key)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// etag stands for a file's content: size and modification time, as a
// directory can tell it cheaply.
func etag(fi fs.FileInfo) string {
	return strconv.FormatInt(fi.Size(), 10) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

func (d *Dir) Get(_ context.Context, key, ifNoneMatch string) ([]byte, Object, error) {
	if !ValidKey(key) {
		return nil, Object{}, fmt.Errorf("invalid object key %q", key)
	}
	target, err := policy.Resolve(d.fsys, ".", key)
	if err != nil {
		return nil, Object{}, fmt.Errorf("%s: %w", d.root, err)
	}
	fi, err := fs.Stat(d.fsys, target)
	if err != nil {
		return nil, Object{}, notFound(err, key)
	}
	obj := Object{Key: key, Size: fi.Size(), ETag: etag(fi)}
	if ifNoneMatch != "" && ifNoneMatch == obj.ETag {
		return nil, obj, ErrNotModified
	}
	if fi.Size() > MaxObjectBytes {
		return nil, obj, fmt.Errorf("%s: %w", key, ErrTooLarge)
	}
	data, err := fs.ReadFile(d.fsys, target)
	if err != nil {
		return nil, Object{}, notFound(err, key)
	}
	obj.Size = int64(len(data))
	return data, obj, nil
}

func (d *Dir) GetVersion(ctx context.Context, key, version string) ([]byte, error) {
	if version != "" {
		return nil, fmt.Errorf("%s: a directory keeps no versions (version %q)", key, version)
	}
	data, _, err := d.Get(ctx, key, "")
	return data, err
}

// List lists the bundle's files (policy.WalkFS), not every file.
func (d *Dir) List(context.Context) ([]Object, error) {
	var objs []Object
	err := policy.WalkFS(d.fsys, ".", func(name, target string) error {
		fi, err := fs.Stat(d.fsys, target)
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: name, Size: fi.Size(), ETag: etag(fi)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.root, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Put writes through a temporary file and a rename, so a reader sees the
// old content or the new, never part of it.
func (d *Dir) Put(_ context.Context, key string, data []byte, _ string) (Object, error) {
	p, err := d.path(key)
	if err != nil {
		return Object{}, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return Object{}, err
	}
	return d.write(key, p, data)
}

// staleLock is how old a lock file of PutIf may be before another writer
// takes it: the lock is held for a stat and a rename, so one this old was
// left by a writer that died.
const staleLock = 30 * time.Second

// PutIf holds a lock file beside the object (created exclusively) while it
// compares the ETag and renames the new content into place: writers that
// honour it are serialized, as a store's precondition serializes them.
func (d *Dir) PutIf(_ context.Context, key string, data []byte, _ string, ifMatch string) (Object, error) {
	p, err := d.path(key)
	if err != nil {
		return Object{}, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return Object{}, err
	}
	lock := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".lock")
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(lock); serr == nil && time.Since(fi.ModTime()) > staleLock {
			os.Remove(lock)
			f, err = os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return Object{}, fmt.Errorf("%s: another writer holds %s: %w", key, lock, ErrConflict)
	}
	if err != nil {
		return Object{}, err
	}
	f.Close()
	defer os.Remove(lock)
	fi, err := os.Stat(p)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Object{}, err
	case err != nil && ifMatch != "", err == nil && ifMatch != etag(fi):
		return Object{}, fmt.Errorf("%s: %w", key, ErrConflict)
	}
	return d.write(key, p, data)
}

func (d *Dir) write(key, p string, data []byte) (Object, error) {
	f, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return Object{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return Object{}, err
	}
	if err := f.Close(); err != nil {
		return Object{}, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return Object{}, err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return Object{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Object{}, err
	}
	return Object{Key: key, Size: fi.Size(), ETag: etag(fi)}, nil
}

// Remove deletes the file at key: what a push into the directory does to a
// file the new bundle no longer has.
func (d *Dir) Remove(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

func notFound(err error, key string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return err
}
