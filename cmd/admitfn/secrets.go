package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/admitfn/admitfn/functions/bundle"
)

func (c *cli) keygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make an ed25519 key pair for signing bundles",
		Long: `Generates an ed25519 key pair for signing bundles: 'admitfn push --sign-key
FILE' signs, and the functions' ADMITFN_BUNDLE_PUBLIC_KEY set to the contents
of FILE.pub verifies. The public key is also printed. openssl makes the same
keys: openssl genpkey -algorithm ed25519 -out FILE; openssl pkey -in FILE
-pubout.`,
		Example: `  admitfn keygen --out bundle.key`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out is required: the file for the private key")
			}
			return keygen(out, c.out)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file for the private key (PKCS #8 PEM, mode 0600); the public key goes to FILE.pub (required)")
	return cmd
}

func keygen(out string, stdout io.Writer) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	privPEM, pubPEM, err := bundle.MarshalKeys(priv)
	if err != nil {
		return err
	}
	// A key's directory is made for it, readable by its owner alone.
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: not overwriting a key", out)
		}
		return err
	}
	if _, err := f.Write(privPEM); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out+".pub", pubPEM, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (key id %s)\n%s", out, out+".pub", bundle.KeyID(priv.Public().(ed25519.PublicKey)), pubPEM)
	return nil
}

func (c *cli) tokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Make a path token for the function's URL",
		Long: `Prints a new path token: 256 random bits in base64url (43 characters). Give
the function ADMITFN_TOKENS=<token> (or two, comma-separated, while rotating)
and render the webhook configuration with --url https://HOST/<token>.`,
		Example: `  TOKEN=$(admitfn token)
  admitfn render -p policies/ --url "https://fn.example.com/$TOKEN"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			_, err := fmt.Fprintln(c.out, base64.RawURLEncoding.EncodeToString(b))
			return err
		},
	}
}
