// Command tfschemas refreshes terraform/testdata/schemas from a directory
// of full provider schemas (`terraform providers schema -json`, gzipped,
// named <provider>-<version>.json.gz): for each file named on the command
// line it keeps the provider's own block and the resource and data source
// types the Terraform files under -uses declare or mock, so the committed
// schemas stay small and hold what tf-check needs.
//
//	go run ./hack/tfschemas -from ../shared/terraform-schemas -to terraform/testdata/schemas -uses terraform aws-6.47.0.json.gz …
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	from := flag.String("from", "", "directory of full schemas")
	to := flag.String("to", "terraform/testdata/schemas", "directory the pruned schemas are written to")
	uses := flag.String("uses", "terraform", "directory of the Terraform files whose types are kept")
	flag.Parse()
	if *from == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: tfschemas -from DIR [-to DIR] [-uses DIR] FILE.json.gz…")
		os.Exit(2)
	}
	types, err := usedTypes(*uses)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tfschemas:", err)
		os.Exit(1)
	}
	for _, name := range flag.Args() {
		if err := prune(filepath.Join(*from, name), filepath.Join(*to, name), types); err != nil {
			fmt.Fprintln(os.Stderr, "tfschemas:", err)
			os.Exit(1)
		}
	}
}

// typeRef finds resource and data source types where Terraform files
// declare them and where tests mock or override them.
var typeRef = regexp.MustCompile(`(?m)^\s*(resource|data|mock_resource|mock_data) "([a-z0-9_]+)"|^\s*target\s*=\s*(data\.)?([a-z0-9]+_[a-z0-9_]+)\.`)

// used is the types of the files under dir: resources and data sources.
type used struct{ resources, dataSources map[string]bool }

func usedTypes(dir string) (used, error) {
	u := used{resources: map[string]bool{}, dataSources: map[string]bool{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".tf") || strings.HasSuffix(path, ".tftest.hcl")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range typeRef.FindAllStringSubmatch(string(src), -1) {
			switch {
			case m[1] == "resource" || m[1] == "mock_resource" || m[4] != "" && m[3] == "":
				u.resources[m[2]+m[4]] = true
			default:
				u.dataSources[m[2]+m[4]] = true
			}
		}
		return nil
	})
	return u, err
}

func prune(from, to string, u used) error {
	raw, err := readGzip(from)
	if err != nil {
		return err
	}
	var file struct {
		FormatVersion   string `json:"format_version"`
		ProviderSchemas map[string]struct {
			Provider          json.RawMessage            `json:"provider"`
			ResourceSchemas   map[string]json.RawMessage `json:"resource_schemas"`
			DataSourceSchemas map[string]json.RawMessage `json:"data_source_schemas"`
		} `json:"provider_schemas"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	out := map[string]any{"format_version": file.FormatVersion}
	schemas := map[string]any{}
	var kept []string
	for address, p := range file.ProviderSchemas {
		keep := func(all map[string]json.RawMessage, want map[string]bool) map[string]json.RawMessage {
			m := map[string]json.RawMessage{}
			for name, s := range all {
				if want[name] {
					m[name] = s
					kept = append(kept, name)
				}
			}
			return m
		}
		schemas[address] = map[string]any{
			"provider":            p.Provider,
			"resource_schemas":    keep(p.ResourceSchemas, u.resources),
			"data_source_schemas": keep(p.DataSourceSchemas, u.dataSources),
		}
	}
	out["provider_schemas"] = schemas
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return err
	}
	sort.Strings(kept)
	fmt.Printf("%s: %d types: %s\n", to, len(kept), strings.Join(kept, " "))
	return os.WriteFile(to, buf.Bytes(), 0o644)
}

func readGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return buf.Bytes(), nil
}
