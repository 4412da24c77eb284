// Package tarball writes reproducible gzipped tar archives: entries in the
// order given, owned by 0:0, dated by one given time, gzip header empty, so
// one input gives one archive byte for byte.
package tarball

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"time"

	"github.com/admitfn/admitfn/hack/build/zipfile"
)

// Write writes entries to w as a tar archive, gzipped when gz is set. A
// name ending in / is a directory.
func Write(w io.Writer, entries []zipfile.Entry, mtime time.Time, gz bool) error {
	out := w
	var zw *gzip.Writer
	if gz {
		var err error
		if zw, err = gzip.NewWriterLevel(w, gzip.BestCompression); err != nil {
			return err
		}
		out = zw
	}
	tw := tar.NewWriter(out)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: int64(e.Mode.Perm()), ModTime: mtime.UTC().Truncate(time.Second), Typeflag: tar.TypeReg, Size: int64(len(e.Data)), Format: tar.FormatPAX}
		if e.Name[len(e.Name)-1] == '/' {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

// Gzip compresses data as Write does: best compression, empty header.
func Gzip(w io.Writer, data []byte) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	return zw.Close()
}
