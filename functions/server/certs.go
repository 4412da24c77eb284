package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// certReloader serves the certificate of --tls-cert and --tls-key, read again
// when either file changes: cert-manager renews a Certificate's Secret in
// place, and the kubelet swaps a mounted Secret's files, so a server keeps
// serving across a rotation without a restart. The files are looked at at
// most once per reloadEvery; a pair that does not load leaves the previous
// one in service, and is logged.
type certReloader struct {
	certFile, keyFile string
	log               *zerolog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and modification times when loaded
	checked time.Time
	failed  string // the stamp of a pair that did not load
}

const reloadEvery = time.Second

func newCertReloader(certFile, keyFile string, log *zerolog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := r.stampNow()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp, r.checked = &cert, stamp, time.Now()
	return r, nil
}

func (r *certReloader) stampNow() (string, error) {
	var stamp string
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%d@%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < reloadEvery {
		return r.cert, nil
	}
	r.checked = time.Now()
	stamp, err := r.stampNow()
	if err != nil || stamp == r.stamp || stamp == r.failed {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Mid-rotation (the certificate written, the key not yet), or a
		// bad pair: keep serving the one that works.
		r.failed = stamp
		r.log.Warn().Err(err).Msg("TLS certificate changed but does not load: still serving the previous one")
		return r.cert, nil
	}
	r.cert, r.stamp, r.failed = &cert, stamp, ""
	r.log.Info().Msg("TLS certificate reloaded")
	return r.cert, nil
}
