package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/admitfn/admitfn/functions/bundle"
)

func keygenCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "file for the private key (PKCS #8 PEM, mode 0600); the public key goes to FILE.pub (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admitfn keygen -out FILE

Generates an ed25519 key pair for signing bundles: 'admitfn push -sign-key FILE'
signs, and the functions' ADMITFN_BUNDLE_PUBLIC_KEY set to the contents of
FILE.pub verifies. The public key is also printed. openssl makes the same keys:
openssl genpkey -algorithm ed25519 -out FILE; openssl pkey -in FILE -pubout.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "-out is required, and nothing else")
		return errUsage
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	privPEM, pubPEM, err := bundle.MarshalKeys(priv)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: not overwriting a key", *out)
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
	if err := os.WriteFile(*out+".pub", pubPEM, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (key id %s)\n%s", *out, *out+".pub", bundle.KeyID(priv.Public().(ed25519.PublicKey)), pubPEM)
	return nil
}

func tokenCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admitfn token

Prints a new path token: 256 random bits in base64url (43 characters). Give
the function ADMITFN_TOKENS=<token> (or two, comma-separated, while rotating)
and render the webhook configuration with -url https://HOST/<token>.
`)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	fmt.Fprintln(stdout, base64.RawURLEncoding.EncodeToString(b))
	return nil
}
