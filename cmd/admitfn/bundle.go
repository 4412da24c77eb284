package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/anystore"
)

// Every command names a bundle the same way: -p/--policies with a
// directory, one YAML or JSON file, or - for standard input.
const policiesUsage = "policy bundle: a directory, a YAML or JSON file, - for standard input, or s3://bucket/prefix or gs://bucket/prefix"

// fetchTimeout bounds reading a bundle through its manifest.
const fetchTimeout = 2 * time.Minute

// maxStdinBundle bounds a bundle read from standard input.
const maxStdinBundle = 64 << 20

func policiesFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "policies", "p", "", policiesUsage)
	cmd.MarkFlagFilename("policies", "yaml", "yml", "json")
}

// bundleName is how messages name the bundle at path.
func bundleName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// readBundle reads the files of the bundle at path, as the functions read a
// directory: .yaml, .yml and .json files, test files and hidden files left out.
func (c *cli) readBundle(path string) ([]policy.Source, error) {
	switch path {
	case "":
		return nil, usagef("name the bundle with -p/--policies: a directory, a YAML or JSON file, - for standard input, or s3://bucket/prefix or gs://bucket/prefix")
	case "-":
		in, err := c.stdin()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(in, maxStdinBundle+1))
		if err != nil {
			return nil, fmt.Errorf("read the bundle from standard input: %w", err)
		}
		if len(data) > maxStdinBundle {
			return nil, fmt.Errorf("the bundle on standard input is larger than %d MiB", maxStdinBundle>>20)
		}
		return []policy.Source{{Name: "stdin.yaml", Data: data}}, nil
	}
	if strings.Contains(path, "://") {
		return c.fetchBundle(path)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bundle %s: no such file or directory", path)
	}
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	if !fi.IsDir() {
		name := filepath.Base(path)
		switch {
		case policy.IsTestFile(name):
			return nil, fmt.Errorf("bundle %s: a test file, not a bundle (run it with admitfn test %s)", path, path)
		case !policy.IsBundleFile(name):
			return nil, fmt.Errorf("bundle %s: not a .yaml, .yml or .json file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sources := []policy.Source{{Name: name, Data: data}}
		return sources, checkSizes(path, sources)
	}
	if _, err := os.Stat(filepath.Join(path, filepath.FromSlash(bundle.ManifestKey))); err == nil {
		// A pushed directory: read as a function reads it, through its
		// manifest, so that what a command tests is what is enforced.
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		defer cancel()
		return c.fetch(ctx, path, store.NewDir(path))
	}
	sources, err := policy.ReadFS(os.DirFS(path), ".")
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return sources, checkSizes(path, sources)
}

// checkSizes refuses a file larger than a function reads: a bundle that
// passes here must load there.
func checkSizes(path string, sources []policy.Source) error {
	for _, s := range sources {
		if len(s.Data) > store.MaxObjectBytes {
			return fmt.Errorf("bundle %s: %s is %d bytes, larger than functions read (%d MiB a file)", path, s.Name, len(s.Data), store.MaxObjectBytes>>20)
		}
	}
	return nil
}

// fetchBundle reads the bundle published at an s3:// or gs:// location
// exactly as a function does: the objects its manifest names, each
// checked against its digest, and the manifest's signature, location and
// expiry checked against ADMITFN_BUNDLE_PUBLIC_KEY when it is set.
func (c *cli) fetchBundle(path string) ([]policy.Source, error) {
	loc, err := store.ParseLocation(path)
	if err != nil {
		return nil, err
	}
	opts, err := anystore.OptionsFromEnv(c.getenv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	bucket, err := anystore.Open(ctx, loc, opts, false)
	if err != nil {
		return nil, withCredentialHint(loc, err)
	}
	sources, err := c.fetch(ctx, path, bucket)
	if err != nil {
		return nil, withCredentialHint(loc, err)
	}
	return sources, nil
}

// fetch reads the bundle at bucket with the function's own Fetcher: the
// objects its manifest names, each checked against its digest, and the
// manifest's signature, location and expiry checked against
// ADMITFN_BUNDLE_PUBLIC_KEY when it is set.
func (c *cli) fetch(ctx context.Context, path string, bucket store.Bucket) ([]policy.Source, error) {
	keys, err := c.publicKeys()
	if err != nil {
		return nil, err
	}
	snap, err := (&bundle.Fetcher{Bucket: bucket, Keys: keys}).Fetch(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return snap.Sources, nil
}

// publicKeys are the keys functions verify manifests with, as
// ADMITFN_BUNDLE_PUBLIC_KEY gives them to the CLI too.
func (c *cli) publicKeys() ([]ed25519.PublicKey, error) {
	keys, err := bundle.ParsePublicKeys(c.getenv("ADMITFN_BUNDLE_PUBLIC_KEY"))
	if err != nil {
		return nil, fmt.Errorf("ADMITFN_BUNDLE_PUBLIC_KEY: %w", err)
	}
	return keys, nil
}

// stdin hands out standard input, which one flag may name.
func (c *cli) stdin() (io.Reader, error) {
	if c.stdinTaken {
		return nil, usagef("standard input (-) can be read only once")
	}
	c.stdinTaken = true
	return c.in, nil
}

// loadBundle reads, parses and compiles the bundle at path, as a function
// would load it.
func (c *cli) loadBundle(path string) (*engine.Engine, *policy.Set, []policy.Source, error) {
	sources, err := c.readBundle(path)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := policy.Parse(sources)
	if err != nil {
		return nil, nil, sources, fmt.Errorf("%s: %w", bundleName(path), err)
	}
	eng, err := engine.New(b, celeval.NewCompiler())
	if err != nil {
		return nil, b, sources, fmt.Errorf("%s: %w", bundleName(path), err)
	}
	return eng, b, sources, nil
}

// policiesArrayFlag registers -p/--policies for a command that takes
// several bundles at once.
func policiesArrayFlag(cmd *cobra.Command, p *[]string, usage string) {
	cmd.Flags().StringArrayVarP(p, "policies", "p", nil, usage+" (repeatable: the bundles together, as a cluster holds them all)")
	cmd.MarkFlagFilename("policies", "yaml", "yml", "json")
}

// loadBundles loads the bundles at paths as one set: what a cluster holds
// when each of them is installed. Their files keep the bundle's path in
// their names, so messages say which bundle; two bundles that define the
// same object are an error, as the second would replace the first in the
// cluster.
func (c *cli) loadBundles(paths []string) (*engine.Engine, *policy.Set, error) {
	switch len(paths) {
	case 0:
		paths = []string{""} // readBundle's usage error
	case 1:
	default:
		var all []policy.Source
		from := map[string]string{} // a file's name → the bundle it was read in
		for _, path := range paths {
			sources, err := c.readBundle(path)
			if err != nil {
				return nil, nil, err
			}
			fi, statErr := os.Stat(path)
			for _, s := range sources {
				switch {
				case path == "-":
					s.Name = "<stdin>/" + s.Name
				case strings.Contains(path, "://"):
					s.Name = strings.TrimSuffix(path, "/") + "/" + s.Name
				case statErr == nil && !fi.IsDir():
					s.Name = filepath.ToSlash(filepath.Clean(path))
				default:
					s.Name = filepath.ToSlash(filepath.Join(path, s.Name))
				}
				if prev, ok := from[s.Name]; ok {
					return nil, nil, usagef("-p/--policies: %s is in both %s and %s", s.Name, prev, path)
				}
				from[s.Name] = path
				all = append(all, s)
			}
		}
		names := strings.Join(paths, ", ")
		b, err := policy.Parse(all)
		if err != nil {
			return nil, nil, fmt.Errorf("bundles %s: %w", names, err)
		}
		eng, err := engine.New(b, celeval.NewCompiler())
		if err != nil {
			return nil, b, fmt.Errorf("bundles %s: %w", names, err)
		}
		return eng, b, nil
	}
	eng, b, _, err := c.loadBundle(paths[0])
	return eng, b, err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Reports carry <stdin> and CEL's && as written, not as \u003c and
	// \u0026 (which HTML escaping is for).
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
