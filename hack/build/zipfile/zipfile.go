// Package zipfile writes reproducible zip archives for deployment packages:
// entries in name order, all dated 1980-01-01, so one input gives one
// archive byte for byte.
package zipfile

import (
	"archive/zip"
	"io"
	"io/fs"
	"sort"
	"time"
)

// Entry is one file of an archive.
type Entry struct {
	Name string // slash-separated path
	Mode fs.FileMode
	Data []byte
}

var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Write writes entries to w.
func Write(w io.Writer, entries []Entry) error {
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	zw := zip.NewWriter(w)
	for _, e := range sorted {
		hdr := &zip.FileHeader{Name: e.Name, Method: zip.Deflate, Modified: epoch}
		hdr.SetMode(e.Mode)
		f, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := f.Write(e.Data); err != nil {
			return err
		}
	}
	return zw.Close()
}
