package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// Neither file may exist, nor be a link, even one to nothing: a key
	// written through a link lands where the link's owner chose, and a
	// public key overwritten in place would no longer match the private
	// key it was distributed with.
	for _, p := range []string{out, out + ".pub"} {
		if err := absent(p); err != nil {
			return err
		}
	}
	// A key's directory is made for it, readable by its owner alone.
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return err
	}
	if err := createNew(out, privPEM, 0o600); err != nil {
		return err
	}
	if err := createNew(out+".pub", pubPEM, 0o644); err != nil {
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

// absent refuses a path where anything is, a link to nothing included.
func absent(path string) error {
	switch fi, err := os.Lstat(path); {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: not writing through it", path)
	case err == nil:
		return fmt.Errorf("%s exists: not overwriting it", path)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return nil
}

// createNew writes a file that must not exist yet: O_EXCL fails on any
// entry at path, a symbolic link included, so nothing is written through
// one made after absent looked.
func createNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return absent(path)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
