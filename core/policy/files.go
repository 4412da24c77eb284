package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// ErrSymlinkEscapes: a symbolic link in a bundle directory leads outside it.
var ErrSymlinkEscapes = errors.New("symbolic link leads outside the bundle directory")

// maxLinks bounds the links followed to resolve one path, as the kernel's
// ELOOP does.
const maxLinks = 40

// WalkFS calls fn, in lexical order, for each file of the bundle under dir in
// fsys: every .yaml, .yml and .json file but test files, in dir and its
// subdirectories, skipping hidden files and directories (which include the
// `..data` internals of a Kubernetes ConfigMap or Secret mount). name is the
// file's path relative to dir, target the path in fsys its content is read
// from: the file itself, or where its symbolic links lead. Links are followed
// when they stay inside dir (a mounted ConfigMap is made of them) and are an
// error, never skipped, when they leave it. Every reader of a bundle
// directory goes through here, so the CLI and the functions load the same
// files.
func WalkFS(fsys fs.FS, dir string, fn func(name, target string) error) error {
	dir = path.Clean(dir)
	return walk(fsys, dir, dir, "", map[string]bool{dir: true}, fn)
}

// walk lists real under the name rel; above holds the directories on the way
// down, so that a link back to one of them ends the descent.
func walk(fsys fs.FS, root, real, rel string, above map[string]bool, fn func(name, target string) error) error {
	entries, err := fs.ReadDir(fsys, real)
	if err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p, n := path.Join(real, name), path.Join(rel, name)
		target, mode := p, e.Type()
		if mode&fs.ModeSymlink != 0 {
			if ext := path.Ext(name); ext != "" && !IsBundleFile(name) {
				continue // README.md, a link the bundle never reads
			}
			if target, err = Resolve(fsys, root, p); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			fi, err := fs.Stat(fsys, target)
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			mode = fi.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if above[target] {
				continue // a link back up: a loop
			}
			above[target] = true
			err := walk(fsys, root, target, n, above, fn)
			delete(above, target)
			if err != nil {
				return err
			}
		case mode.IsRegular() && IsBundleFile(name):
			if err := fn(n, target); err != nil {
				return err
			}
		}
	}
	return nil
}

// Resolve returns the path in fsys that p names once every symbolic link on
// the way is followed, component by component as the kernel does, when each
// step stays inside root; else an error wrapping ErrSymlinkEscapes. Absolute
// link targets are refused: an fs.FS cannot tell where they lead. Without
// fs.ReadLinkFS, p is returned as it is.
func Resolve(fsys fs.FS, root, p string) (string, error) {
	rfs, ok := fsys.(fs.ReadLinkFS)
	if !ok {
		return p, nil
	}
	root = path.Clean(root)
	p = path.Clean(p)
	rel, ok := strings.CutPrefix(p, root+"/")
	switch {
	case root == ".":
		rel = p
	case p == root:
		rel = "."
	case !ok:
		return "", fmt.Errorf("%s: %w", p, ErrSymlinkEscapes)
	}
	done, todo := root, strings.Split(rel, "/")
	via := p // the last link followed, for errors
	for links := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if done == root {
				return "", fmt.Errorf("%s: %w", via, ErrSymlinkEscapes)
			}
			done = path.Dir(done)
			continue
		}
		q := path.Join(done, c)
		fi, err := rfs.Lstat(q)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			// Missing components are the caller's not-found to report.
			done = q
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		to, err := rfs.ReadLink(q)
		if err != nil {
			return "", err
		}
		via = q + " -> " + to
		if path.IsAbs(to) {
			return "", fmt.Errorf("%s: %w (absolute targets are not followed)", via, ErrSymlinkEscapes)
		}
		// The target is relative to the link's directory, done.
		todo = append(strings.Split(to, "/"), todo...)
	}
	return done, nil
}
