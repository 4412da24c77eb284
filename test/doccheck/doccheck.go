// Package doccheck finds the examples of the user documentation (README.md,
// CONTRIBUTING.md and docs/*.md): every fenced block, with the tests that
// check it. A block's checks are named by the HTML comment on the line
// before its opening fence:
//
//	<!-- checked by TestReadmeQuickStartAnswers -->
//	```json
//
// TestEveryExampleIsChecked holds every block but the sh ones to having a
// marker, naming a test that exists and reads that file; TestDocCommands
// checks every command of every sh block. In docs/performance.md alone, a
// block may instead be marked as the record of one past measurement, which
// no later run reproduces:
//
//	<!-- a record of one measurement -->
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Block is one fenced block of a document.
type Block struct {
	File   string   // relative to the repository root
	Line   int      // of the opening fence, counting from 1
	Lang   string   // the fence's info string: sh, json, yaml, text or none
	Checks []string // the tests its marker names
	Record bool     // marked as the record of one measurement
	Text   string   // the lines between the fences, indentation removed
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var (
	marker = regexp.MustCompile(`^\s*<!-- checked by ((?:Test\w+)(?:, Test\w+)*) -->\s*$`)
	record = regexp.MustCompile(`^\s*<!-- a record of one measurement -->\s*$`)
)

// Root is the repository's root: the nearest directory above the working
// directory holding go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Files lists the documents, relative to root.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	return files, nil
}

// All parses every document's blocks.
func All(root string) ([]Block, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var all []Block
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		blocks, err := Parse(f, data)
		if err != nil {
			return nil, err
		}
		all = append(all, blocks...)
	}
	return all, nil
}

// Parse finds the fenced blocks of one document.
func Parse(file string, data []byte) ([]Block, error) {
	var (
		blocks []Block
		open   *Block
		indent string
		text   strings.Builder
		prev   string
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case open == nil && strings.HasPrefix(trimmed, "```"):
			open = &Block{File: file, Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			indent = line[:len(line)-len(trimmed)]
			if m := marker.FindStringSubmatch(prev); m != nil {
				open.Checks = strings.Split(m[1], ", ")
			}
			open.Record = record.MatchString(prev)
			text.Reset()
		case open != nil && trimmed == "```":
			open.Text = text.String()
			blocks = append(blocks, *open)
			open = nil
		case open != nil:
			text.WriteString(strings.TrimPrefix(line, indent))
			text.WriteByte('\n')
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if open != nil {
		return nil, fmt.Errorf("%s: the block opened on line %d is not closed", file, open.Line)
	}
	return blocks, nil
}

// Marked returns the blocks of file (relative to the repository root)
// whose marker names test.
func Marked(file, test string) ([]Block, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	blocks, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	var found []Block
	for _, b := range blocks {
		if slices.Contains(b.Checks, test) {
			found = append(found, b)
		}
	}
	return found, nil
}

// Find returns the blocks of file (relative to the repository root) whose
// marker names the calling test, and fails the test when there are not
// exactly want of them: a marker moved or dropped fails the test that
// checked its block.
func Find(t testing.TB, file string, want int) []Block {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	found, err := Marked(file, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != want {
		t.Fatalf("%s: %d blocks marked <!-- checked by %s -->, want %d", file, len(found), name, want)
	}
	return found
}

var figure = regexp.MustCompile(`\d[\d.]*(?:[a-zµ]+\d[\d.]*)*[a-zµ]*`)

// Shape is a measurement's text with every figure and its unit (1234,
// 1.5ms, 1m0.04s, go1.26.8) replaced by N: what a record in the
// documentation shares with any run of the command that printed it.
func Shape(s string) string { return figure.ReplaceAllString(s, "N") }
