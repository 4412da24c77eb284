package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/anystore"
)

func pushCmd(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policies := fs.String("policies", "", "policy bundle directory (required)")
	to := fs.String("to", "", "where to publish: s3://bucket/prefix, gs://bucket/prefix or a directory (required)")
	signKey := fs.String("sign-key", "", "ed25519 private key (PKCS #8 PEM) to sign the manifest with")
	expires := fs.Duration("expires", bundle.DefaultExpiry, "how long functions accept the manifest of a bucket (not of a directory); re-sign before then")
	resign := fs.Bool("resign", false, "sign the manifest at -to again with a new serial and expiry, uploading nothing (needs -sign-key; with -policies, only if they are the bundle published there)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	output := fs.String("o", "text", "output format: text or json (the manifest)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admitfn push -policies DIR -to s3://bucket/prefix|gs://bucket/prefix|DIR [flags]
       admitfn push -resign -sign-key KEY -to s3://bucket/prefix|gs://bucket/prefix [-policies DIR]

Publishes a bundle where functions load it from (their ADMITFN_POLICIES). The
bundle is compiled first, exactly as a function would: a bundle that would not
load is not published. Then each policy file is uploaded under the prefix with
its path in the bundle, and the manifest (.admitfn/manifest.json) is written
last: object keys, sizes, sha256 digests, versions (where the bucket keeps
them), bundle ID and creation time. Functions read only what a manifest names,
so they switch from one bundle to the next in one step; test files
(*_test.yaml) and hidden files are not uploaded.

With -sign-key the manifest is signed; functions with ADMITFN_BUNDLE_PUBLIC_KEY
load only bundles signed by a matching key (see 'admitfn keygen'). A manifest
in a bucket names the location it was published for, a serial higher than the
manifest it replaces, and an expiry (-expires): functions refuse it anywhere
else, after it expires, and when it is older than the bundle they serve. Keep
an unchanged bundle loading with -resign, on a schedule shorter than -expires.

Credentials come from each SDK's usual chain: for S3 the AWS default chain
(AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_S3, and ADMITFN_S3_PATH_STYLE=true
for S3-compatible servers), for GCS Application Default Credentials
(STORAGE_EMULATOR_HOST for an emulator).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return errUsage
	case *resign && (*to == "" || *signKey == ""):
		fmt.Fprintln(stderr, "-resign needs -to and -sign-key")
		return errUsage
	case !*resign && (*policies == "" || *to == ""):
		fmt.Fprintln(stderr, "-policies and -to are required")
		return errUsage
	case *expires <= 0:
		fmt.Fprintf(stderr, "-expires must be positive, not %v\n", *expires)
		return errUsage
	case *output != "text" && *output != "json":
		fmt.Fprintf(stderr, "-o must be text or json, not %q\n", *output)
		return errUsage
	}
	loc, err := store.ParseLocation(*to)
	if err != nil {
		return err
	}
	var key ed25519.PrivateKey
	if *signKey != "" {
		data, err := os.ReadFile(*signKey)
		if err != nil {
			return err
		}
		if key, err = bundle.ParsePrivateKey(data); err != nil {
			return fmt.Errorf("%s: %w", *signKey, err)
		}
	}
	storeOpts, err := anystore.OptionsFromEnv(getenv)
	if err != nil {
		return err
	}

	var sources []policy.Source
	if *policies != "" {
		if sources, err = policy.ReadFS(os.DirFS(*policies), "."); err != nil {
			return fmt.Errorf("%s: %w", *policies, err)
		}
		b, err := policy.Parse(sources)
		if err != nil {
			return fmt.Errorf("%s: %w", *policies, err)
		}
		if _, err := engine.New(b, celeval.NewCompiler()); err != nil {
			return fmt.Errorf("%s: %w", *policies, err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	bucket, err := anystore.Open(ctx, loc, storeOpts, true)
	if err != nil {
		return err
	}
	opts := bundle.PublishOptions{SignKey: key, Expiry: *expires}
	var m *bundle.Manifest
	if *resign {
		id := ""
		if sources != nil {
			id = policy.ID(sources)
		}
		m, err = bundle.Resign(ctx, bucket, id, opts)
	} else {
		m, err = bundle.Publish(ctx, bucket, sources, opts)
	}
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	signed := "unsigned"
	if key != nil {
		signed = "signed by key " + bundle.KeyID(key.Public().(ed25519.PublicKey))
	}
	stamp := fmt.Sprintf("serial %d", m.Serial)
	if !m.Expires.IsZero() {
		stamp += ", expires " + m.Expires.Format(time.RFC3339)
	}
	if *resign {
		fmt.Fprintf(stdout, "re-signed bundle %s at %s: manifest %s, %s, %s\n", m.Bundle, loc, loc.Key(bundle.ManifestKey), signed, stamp)
		return nil
	}
	for _, o := range m.Objects {
		v := ""
		if o.Version != "" {
			v = " version " + o.Version
		}
		fmt.Fprintf(stdout, "uploaded %s (%d bytes, sha256 %s%s)\n", loc.Key(o.Key), o.Size, o.SHA256[:12], v)
	}
	fmt.Fprintf(stdout, "published bundle %s to %s: %d files, manifest %s, %s, %s\n", m.Bundle, loc, len(m.Objects), loc.Key(bundle.ManifestKey), signed, stamp)
	return nil
}
