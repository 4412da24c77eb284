package zipfile

import (
	"archive/zip"
	"bytes"
	"testing"
	"time"
)

func TestReproducible(t *testing.T) {
	entries := []Entry{{"b/x.go", 0o644, []byte("package x\n")}, {"bootstrap", 0o755, []byte("\x7fELF")}}
	var one, two bytes.Buffer
	if err := Write(&one, entries); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a second later: the archive must not say when it was made
	if err := Write(&two, []Entry{entries[1], entries[0]}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Fatal("one input, two archives")
	}
	zr, err := zip.NewReader(bytes.NewReader(one.Bytes()), int64(one.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2 || zr.File[0].Name != "b/x.go" || zr.File[0].Mode() != 0o644 || zr.File[1].Name != "bootstrap" || zr.File[1].Mode() != 0o755 ||
		!zr.File[1].Modified.Equal(epoch) {
		t.Errorf("entries: %v %v", zr.File[0].FileHeader, zr.File[1].FileHeader)
	}
}
