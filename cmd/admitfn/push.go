package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/anystore"
)

func (c *cli) pushCmd() *cobra.Command {
	var (
		policies, to, signKey, output, expect string
		expires, timeout, transition          time.Duration
		resign, allowWebhookChange, unsigned  bool
	)
	cmd := &cobra.Command{
		Use:   "push -p BUNDLE --to s3://bucket/prefix|gs://bucket/prefix|DIR",
		Short: "Publish a bundle to S3, GCS or a directory, manifest last, optionally signed",
		Long: `Publishes a bundle where functions load it from (their ADMITFN_POLICIES). The
bundle is compiled first, exactly as a function would: a bundle that would not
load is not published. Then each policy file is uploaded under the prefix with
its path in the bundle (a progress line each), then the packed form
(.admitfn/packed.json: every file, and its documents parsed, which functions
read in one request), and the manifest (.admitfn/manifest.json) is written
last: object keys, sizes, sha256 digests, versions (where the bucket keeps
them), bundle ID, creation time and the build that compiled it (functions
of that build start before compiling it, and parse no YAML when the
manifest is signed and they verify it). Functions read
only what a manifest names, so they switch from one bundle to the next in one
step; test files (*_test.yaml) and hidden files are not uploaded.

With --sign-key the manifest is signed; functions with ADMITFN_BUNDLE_PUBLIC_KEY
load only bundles signed by a matching key (see 'admitfn keygen'). A location
whose manifest is signed stays signed: push refuses an unsigned bundle there
(--allow-unsigned to stop signing it on purpose), and one signed by another
key than the manifest's unless ADMITFN_BUNDLE_PUBLIC_KEY names it. A manifest
in a bucket names the location it was published for, a serial higher than the
manifest it replaces, and an expiry (--expires): functions refuse it anywhere
else, after it expires, and when it is older than the bundle they serve. Keep
an unchanged bundle loading with --resign, on a schedule shorter than --expires:
it re-signs the manifest in place only when it is the bundle of -p (or the
bundle ID --expect names), so a re-sign never blesses an older manifest put
back in the bucket.
The serial follows the manifest in place only when it verifies with the
signing key or a key of ADMITFN_BUNDLE_PUBLIC_KEY and names this location
(anyone who can write the bucket can put a manifest there); otherwise push
warns and starts from the last signed manifest it kept (.admitfn/signed.json),
or from the time in Unix seconds. With ADMITFN_BUNDLE_PUBLIC_KEY set, an
unsigned push is refused. Push then reads the bundle back as a function would,
and fails on anything a function would refuse.

One push at a time: a push holds the location's lock (.admitfn/lock.json) for
at most --timeout, and writes its manifest only over the one it read (S3
If-Match, a GCS generation precondition, a lock file in a directory). A push
that finds another running, or whose manifest another replaced meanwhile,
fails and writes no manifest.

Before uploading, push compares the bundle with the one published at the
location (as 'admitfn diff' does) and prints the difference. A group's route
names its selectors, failurePolicy, reinvocationPolicy and bindings: a bundle
that adds, removes or moves a binding, or changes what kube-apiserver filters
by, changes the webhook configuration, which must then be applied again.
Push refuses such a bundle unless --allow-webhook-change is given. The
manifest then keeps the bundle that had each retired route, and functions
answer those routes with it for --transition, so the configuration in place
keeps its decisions until the new one is applied (docs/cluster.md). The
rendered configurations are published too (.admitfn/webhooks.json, named by
the manifest, URL https://admitfn.invalid), for the Terraform webhook module.

Into a directory, push writes exactly the bundle: it removes the files an
earlier push wrote that the bundle no longer has, and refuses a directory
holding other policy files. Every command reads a directory with a manifest
as a function does: a policy file the manifest does not name is an error
(push again). Into a bucket, once the new bundle is written and read back,
push deletes the objects the bundle it replaces had and it has not; objects
no manifest named stay, and without the permission to delete it warns.

Credentials come from each SDK's usual chain: for S3 the AWS default chain
(AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_S3, and ADMITFN_S3_PATH_STYLE=true
for S3-compatible servers), for GCS Application Default Credentials
(STORAGE_EMULATOR_HOST for an emulator).`,
		Example: `  admitfn push -p policies/ --to s3://my-bucket/admitfn --sign-key bundle.key
  admitfn push -p policies/ --to gs://my-bucket/admitfn -o json
  admitfn push --resign --sign-key bundle.key --to s3://my-bucket/admitfn -p policies/`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case resign && (to == "" || signKey == ""):
				return usagef("--resign needs --to and --sign-key")
			case resign && policies == "" && expect == "":
				return usagef("--resign needs the bundle it re-signs: -p with its policies, or --expect with its bundle ID (a manifest put back in the bucket is signed by the key too)")
			case resign && policies != "" && expect != "":
				return usagef("--resign takes -p or --expect, not both")
			case !resign && expect != "":
				return usagef("--expect goes with --resign")
			case resign && unsigned:
				return usagef("--allow-unsigned does not go with --resign, which signs")
			case !resign && (policies == "" || to == ""):
				return usagef("-p/--policies and --to are required")
			case expires <= 0:
				return usagef("--expires must be positive, not %v", expires)
			}
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			if transition < 0 {
				return usagef("--transition must be 0 or more, not %v", transition)
			}
			// The lease outlasts the push, which its timeout ends.
			opts := bundle.PublishOptions{Expiry: expires, Transition: transition, AllowUnsigned: unsigned, Lease: timeout + time.Minute}
			if transition == 0 {
				opts.Transition = -1
			}
			return c.push(policies, to, signKey, output, expect, resign, allowWebhookChange, opts, timeout)
		},
	}
	policiesFlag(cmd, &policies)
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "where to publish: s3://bucket/prefix, gs://bucket/prefix or a directory (required)")
	f.StringVar(&signKey, "sign-key", "", "ed25519 private key (PKCS #8 PEM) to sign the manifest with")
	f.DurationVar(&expires, "expires", bundle.DefaultExpiry, "how long functions accept the manifest of a bucket (not of a directory); re-sign before then")
	f.BoolVar(&resign, "resign", false, "sign the manifest at --to again with a new serial and expiry, uploading nothing (needs --sign-key, and -p or --expect: only if it is that bundle)")
	f.StringVar(&expect, "expect", "", "with --resign: the bundle ID the manifest must name (instead of -p)")
	f.BoolVar(&unsigned, "allow-unsigned", false, "publish unsigned over a location whose manifest is signed (its functions refuse it: only to stop signing on purpose)")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	f.BoolVar(&allowWebhookChange, "allow-webhook-change", false, "publish a bundle whose webhook configuration differs from the published one's (apply it again after the push)")
	f.DurationVar(&transition, "transition", bundle.DefaultTransition, "how long functions keep answering the routes this push retires, with the bundle that had them (0: not at all)")
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

// pushReport is push -o json: where the bundle went and its manifest.
type pushReport struct {
	Location string           `json:"location"`
	Manifest string           `json:"manifest"`
	KeyID    string           `json:"keyID,omitempty"`
	Resigned bool             `json:"resigned,omitempty"`
	Diff     *bundleDiff      `json:"diff,omitempty"`
	Content  *bundle.Manifest `json:"content"`
	// Removed are the keys of the objects the bundle it replaced had and
	// it has not, which the push deleted.
	Removed []string `json:"removed,omitempty"`
}

// errWebhookChange: push refuses a bundle whose webhook configuration
// changes, unless asked.
var errWebhookChange = errors.New("the bundle changes the webhook configuration, which the cluster must then apply again: push it with --allow-webhook-change, then apply the configuration it publishes (the Terraform webhook module, or admitfn render)")

func (c *cli) push(policies, to, signKey, output, expect string, resign, allowWebhookChange bool, opts bundle.PublishOptions, timeout time.Duration) error {
	loc, err := store.ParseLocation(to)
	if err != nil {
		return err
	}
	if signKey != "" {
		data, err := os.ReadFile(signKey)
		if err != nil {
			return err
		}
		if opts.SignKey, err = bundle.ParsePrivateKey(data); err != nil {
			return fmt.Errorf("%s: %w", signKey, err)
		}
		if fi, err := os.Stat(signKey); err == nil && fi.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(c.err, "warning: signing key %s is readable by others (mode %04o): whoever reads it can sign bundles every function loads; chmod 600 it\n", signKey, fi.Mode().Perm())
		}
	}
	if opts.TrustedKeys, err = c.publicKeys(); err != nil {
		return err
	}
	warned := map[string]bool{}
	opts.Warn = func(msg string) {
		// The diff and the publish both read the manifest in place.
		if !warned[msg] {
			warned[msg] = true
			fmt.Fprintf(c.err, "warning: %s\n", msg)
		}
	}
	storeOpts, err := anystore.OptionsFromEnv(c.getenv)
	if err != nil {
		return err
	}

	var (
		sources []policy.Source
		set     *policy.Set
	)
	if policies != "" {
		if _, set, sources, err = c.loadBundle(policies); err != nil {
			return err
		}
		if opts.Webhooks, err = publishedWebhooks(set); err != nil {
			return err
		}
		// It compiled: functions of this build may compile it on use,
		// reading it packed, its YAML already parsed.
		tc := bundle.ThisToolchain()
		opts.CompiledBy, opts.Pack = &tc, true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bucket, err := anystore.Open(ctx, loc, storeOpts, true)
	if err != nil {
		return withCredentialHint(loc, err)
	}
	// Progress: on stdout as the text report, on a terminal's stderr
	// beside JSON.
	progress := io.Discard
	if output == "text" {
		progress = c.out
	} else if f, ok := c.err.(*os.File); ok && isTerminal(f) {
		progress = c.err
	}
	opts.Uploaded = func(o bundle.ManifestObject) {
		v := ""
		if o.Version != "" {
			v = " version " + o.Version
		}
		fmt.Fprintf(progress, "uploaded %s (%d bytes, sha256 %s%s)\n", loc.Key(o.Key), o.Size, o.SHA256[:12], v)
	}
	var removed []string
	opts.Removed = func(key string) {
		removed = append(removed, loc.Key(key))
		fmt.Fprintf(progress, "removed %s: the bundle no longer has it\n", loc.Key(key))
	}
	var diff *bundleDiff
	if !resign {
		prev, err := bundle.Published(ctx, bucket, opts)
		if err != nil {
			return withCredentialHint(loc, err)
		}
		if diff, err = diffBundles(loc.String(), prev, set, sources); err != nil {
			return err
		}
		if output == "text" {
			diff.write(c.out)
		}
		if prev != nil && diff.WebhooksChanged && !allowWebhookChange {
			return errWebhookChange
		}
		opts.Replaces = prev
	}
	var m *bundle.Manifest
	if resign {
		id := expect
		if sources != nil {
			id = policy.ID(sources)
		}
		m, err = bundle.Resign(ctx, bucket, id, opts)
	} else {
		m, err = bundle.Publish(ctx, bucket, sources, opts)
	}
	if err != nil {
		return withCredentialHint(loc, err)
	}
	keyID := ""
	if opts.SignKey != nil {
		keyID = bundle.KeyID(opts.SignKey.Public().(ed25519.PublicKey))
	}
	if output == "json" {
		return writeJSON(c.out, pushReport{Location: loc.String(), Manifest: loc.Key(bundle.ManifestKey), KeyID: keyID, Resigned: resign, Diff: diff, Content: m, Removed: removed})
	}
	signed := "unsigned"
	if keyID != "" {
		signed = "signed by key " + keyID
	}
	stamp := fmt.Sprintf("serial %d", m.Serial)
	if !m.Expires.IsZero() {
		stamp += ", expires " + m.Expires.Format(time.RFC3339)
	}
	if resign {
		fmt.Fprintf(c.out, "re-signed bundle %s at %s: manifest %s, %s, %s\n", m.Bundle, loc, loc.Key(bundle.ManifestKey), signed, stamp)
		return nil
	}
	fmt.Fprintf(c.out, "published bundle %s to %s: %s, manifest %s, %s, %s\n", m.Bundle, loc, plural(len(m.Objects), "file"), loc.Key(bundle.ManifestKey), signed, stamp)
	for _, r := range m.Retired {
		fmt.Fprintf(c.out, "retired routes served with bundle %s until %s: %s\n", r.Bundle, r.Until.Format(time.RFC3339), strings.Join(r.Routes, " "))
	}
	return nil
}

// withCredentialHint says where credentials come from when the SDK found
// none, instead of leaving the user its provider chain.
func withCredentialHint(loc store.Location, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, store.ErrNoBucket):
		check := "the name"
		if loc.Scheme == "s3" {
			check += " and AWS_REGION"
		}
		return fmt.Errorf("%s: the bucket %q does not exist: create it (the Terraform modules make one), or check %s", loc, loc.Bucket, check)
	case loc.Scheme == "s3" && (strings.Contains(msg, "get credentials") || strings.Contains(msg, "failed to refresh cached credentials")):
		return fmt.Errorf("%s: no AWS credentials found. Set AWS_PROFILE to a profile in ~/.aws/config (after 'aws sso login' or 'aws configure'), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where an IAM role is attached; AWS_REGION names the bucket's region", loc)
	case loc.Scheme == "gs" && strings.Contains(msg, "could not find default credentials"):
		return fmt.Errorf("%s: no Google credentials found. Run 'gcloud auth application-default login', or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run where a service account is attached (STORAGE_EMULATOR_HOST points at an emulator)", loc)
	}
	return err
}
