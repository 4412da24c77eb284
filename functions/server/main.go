// Command server serves a policy bundle over HTTP(S): locally, in a
// container, or on Cloud Run. kube-apiserver calls it through a
// ValidatingWebhookConfiguration rendered by `admitfn render`.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/adapters/metrics/prommetrics"
	"github.com/admitfn/admitfn/core/version"
	"github.com/admitfn/admitfn/functions/bundle/reload"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/anystore"
	"github.com/admitfn/admitfn/functions/cluster"
	"github.com/admitfn/admitfn/functions/cluster/eksauth"
	"github.com/admitfn/admitfn/functions/cluster/gkeauth"
	"github.com/admitfn/admitfn/functions/internal/envvar"
	"github.com/admitfn/admitfn/functions/internal/hangup"
	"github.com/admitfn/admitfn/functions/internal/logging"
	"github.com/admitfn/admitfn/functions/internal/memlimit"
	"github.com/admitfn/admitfn/functions/internal/startup"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		if errors.Is(err, errVersion) {
			fmt.Println(version.Get())
			return
		}
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		var usage usageError
		if errors.As(err, &usage) {
			// As the CLI: a wrong command line or configuration exits 2.
			fmt.Fprintf(os.Stderr, "admitfn server: %v\nRun 'server --help' for usage.\n", usage.error)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "admitfn server:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, tlsCert, tlsKey, logLevel string
	readHeaderTimeout               time.Duration
	maxConnections                  int
	// maxConnectionsAsked: the cap was set by flag or variable, not left
	// at its default.
	maxConnectionsAsked             bool
	bundle                          startup.Config
	tokens                          []string
	tokensFile, basicFile, clientCA string
	clusters                        string
}

// usageError is a wrong flag, flag value or variable: exit 2, as the CLI.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// errVersion: --version was given; main prints the version instead of serving.
var errVersion = errors.New("version requested")

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c, err := parseFlags(args, getenv, stderr)
	if err != nil && !errors.Is(err, pflag.ErrHelp) && !errors.Is(err, errVersion) {
		var usage usageError
		if !errors.As(err, &usage) {
			err = usageError{err}
		}
	}
	return c, err
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c config
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	fs.SetInterspersed(false) // no arguments: the first one stops the parse, and is refused
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: server [flags]\n\nServes the policy bundle on POST /validate[/<group>] and /mutate[/<group>], GET /healthz,\nGET /readyz and GET /metrics (Prometheus).\nEach flag's default comes from the environment variable named with it. Object stores are\nchecked for a new bundle in the background and on requests; S3 reads AWS_REGION,\nAWS_ENDPOINT_URL_S3 and ADMITFN_S3_PATH_STYLE=true, GCS honours STORAGE_EMULATOR_HOST.\n\nFlags:\n")
		fmt.Fprint(stderr, fs.FlagUsages())
	}
	fs.StringVar(&c.addr, "addr", env("ADMITFN_ADDR", "127.0.0.1:8080"), "listen address (ADMITFN_ADDR)")
	fs.StringVarP(&c.bundle.Policies, "policies", "p", env("ADMITFN_POLICIES", "policies/examples"), "policy bundle: a directory, s3://bucket/prefix or gs://bucket/prefix (ADMITFN_POLICIES)")
	fs.StringVar(&c.bundle.Fallback, "fallback-policies", env("ADMITFN_FALLBACK_POLICIES", ""), "directory served while the bundle cannot be loaded (ADMITFN_FALLBACK_POLICIES)")
	fs.StringVar(&c.bundle.PublicKey, "bundle-public-key", env("ADMITFN_BUNDLE_PUBLIC_KEY", ""), "ed25519 public keys (PEM or base64); only bundles signed by one load (ADMITFN_BUNDLE_PUBLIC_KEY)")
	interval := fs.String("refresh-interval", env("ADMITFN_REFRESH_INTERVAL", "30s"), "how often to check for a new bundle; 0 turns refresh off (ADMITFN_REFRESH_INTERVAL)")
	fs.StringVar(&c.tlsCert, "tls-cert", env("ADMITFN_TLS_CERT", ""), "TLS certificate PEM file; with --tls-key serves HTTPS, read again when either file changes (ADMITFN_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", env("ADMITFN_TLS_KEY", ""), "TLS private key PEM file (ADMITFN_TLS_KEY)")
	tokens := fs.String("tokens", env("ADMITFN_TOKENS", ""), "path tokens, comma-separated: reviews are served on /<token>/validate… (ADMITFN_TOKENS; prefer the variable: flags show in ps)")
	fs.StringVar(&c.tokensFile, "auth-tokens-file", env("ADMITFN_AUTH_TOKENS_FILE", ""), "file of bearer tokens, one per line, one of which each review must carry (ADMITFN_AUTH_TOKENS_FILE)")
	fs.StringVar(&c.basicFile, "auth-basic-file", env("ADMITFN_AUTH_BASIC_FILE", ""), "file of user:password lines for basic authentication of reviews (ADMITFN_AUTH_BASIC_FILE)")
	fs.StringVar(&c.clientCA, "client-ca", env("ADMITFN_CLIENT_CA", ""), "PEM CA bundle: reviews and /metrics need a client certificate signed by it, probes do not (mTLS; needs --tls-cert) (ADMITFN_CLIENT_CA)")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", envDuration(getenv, "ADMITFN_READ_HEADER_TIMEOUT", 10*time.Second), "drop connections that have not sent their headers by then: slow clients hold no connection for long (ADMITFN_READ_HEADER_TIMEOUT)")
	fs.IntVar(&c.maxConnections, "max-connections", envInt(getenv, "ADMITFN_MAX_CONNECTIONS", DefaultMaxConnections), "open connections at most, and no more than the file-descriptor limit leaves (an eighth of it, at least 32, is kept for the rest); at the cap a new one closes the longest idle (ADMITFN_MAX_CONNECTIONS)")
	fs.StringVar(&c.clusters, "clusters", env("ADMITFN_CLUSTERS", ""), "clusters served, each on /clusters/<name>/validate…: names, comma-separated, or the path of a YAML file (or a YAML or JSON document) that also says how to read each one; see docs/cluster.md (ADMITFN_CLUSTERS)")
	fs.StringVar(&c.logLevel, "log-level", env("ADMITFN_LOG_LEVEL", "info"), "log level: debug, info, warn, error (ADMITFN_LOG_LEVEL)")
	exactCost, exactCostErr := envvar.Bool("ADMITFN_EXACT_COST", getenv("ADMITFN_EXACT_COST"))
	fs.BoolVar(&c.bundle.ExactCost, "exact-cost", exactCost, "track the cost of every CEL evaluation with cel-go's tracker, as kube-apiserver does, instead of only where a bound cannot prove the limits safe (ADMITFN_EXACT_COST)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := singleDashLongFlag(fs, args); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *showVersion {
		return c, errVersion
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if exactCostErr != nil {
		return c, exactCostErr
	}
	if _, err := logging.Level(c.logLevel); err != nil {
		return c, err
	}
	c.maxConnectionsAsked = getenv("ADMITFN_MAX_CONNECTIONS") != ""
	// Set but empty is an error, not no key, and getenv cannot tell the two
	// apart: the process's own environment can.
	_, c.bundle.PublicKeySet = os.LookupEnv("ADMITFN_BUNDLE_PUBLIC_KEY")
	c.bundle.PublicKeySet = c.bundle.PublicKeySet || c.bundle.PublicKey != ""
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "max-connections":
			c.maxConnectionsAsked = true
		case "bundle-public-key":
			c.bundle.PublicKeySet = true
		}
	})
	if c.maxConnections < 1 {
		return c, fmt.Errorf("--max-connections must be at least 1, not %d", c.maxConnections)
	}
	var err error
	if c.bundle.Interval, err = startup.ParseInterval(*interval); err != nil {
		return c, err
	}
	storeOpts, err := anystore.OptionsFromEnv(getenv)
	if err != nil {
		return c, err
	}
	c.bundle.S3PathStyle = storeOpts.S3PathStyle
	c.bundle.Open = func(ctx context.Context, loc store.Location) (store.Bucket, error) {
		return anystore.Open(ctx, loc, storeOpts, false)
	}
	c.bundle.InitTimeout = 10 * time.Second
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, errors.New("--tls-cert and --tls-key go together")
	}
	if c.clientCA != "" && c.tlsCert == "" {
		return c, errors.New("--client-ca verifies client certificates, which needs HTTPS: set --tls-cert and --tls-key")
	}
	if c.tokens, err = httpadapter.ParseTokens(*tokens); err != nil {
		return c, fmt.Errorf("--tokens: %w", err)
	}
	return c, nil
}

// run serves until ctx is done, then shuts down gracefully. ready, if set,
// is called with the listening address once the server accepts connections.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	// Caught from the start of the process (package hangup): a SIGHUP
	// while it starts must not end it (the signal's default).
	hup := hangup.C
	logging.QuietLibraries()
	level, _ := logging.Level(cfg.logLevel) // checked by parseConfig
	zerolog.TimeFieldFormat = time.RFC3339Nano
	log := zerolog.New(stderr).Level(level).With().Timestamp().Logger()
	limit := startup.MemoryLimit(getenv, log, memlimit.Cgroup())
	cfg.bundle.MemoryLimit = limit
	cfg.bundle.Background = true // rl.Run below
	cfg.bundle.Settled = func() { log.Debug().Msg("bundle settled: compiled, and its background work done") }

	rl, err := startup.Start(ctx, cfg.bundle, log)
	if err != nil {
		return err
	}

	opts, tlsConfig, err := access(cfg)
	if err != nil {
		return err
	}
	clusters, err := startup.Clusters(cfg.clusters, cluster.Authenticators{EKS: eksauth.Tokens, GKE: gkeauth.Tokens}, log)
	if err != nil {
		return err
	}
	if clusters != nil {
		opts = append(opts, httpadapter.WithClusters(clusters))
	}
	rec := prommetrics.New(startup.Metrics(rl))
	opts = append(opts, httpadapter.WithMetrics(rec), httpadapter.WithMetricsHandler(rec.Handler()), httpadapter.WithLimits(httpadapter.LimitsFor(limit.Bytes)))
	tcp, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	nofile := fdLimit()
	maxConns, warning, err := connCap(cfg.maxConnections, cfg.maxConnectionsAsked, nofile)
	if err != nil {
		tcp.Close()
		return err
	}
	if warning != "" {
		log.Warn().Uint64("fd_limit", nofile).Int("max_connections", maxConns).Msg(warning)
	}
	ln := limitConns(tcp, maxConns)
	srv := &http.Server{
		Handler:           httpadapter.New(rl, log, opts...),
		ReadHeaderTimeout: cfg.readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      35 * time.Second,
		IdleTimeout:       idleTimeout,
		ConnState:         ln.ConnState,
		MaxHeaderBytes:    httpadapter.MaxHeaderBytes,
		TLSConfig:         tlsConfig,
	}
	scheme := "http"
	if cfg.tlsCert != "" {
		scheme = "https"
		certs, err := newCertReloader(cfg.tlsCert, cfg.tlsKey, &log)
		if err != nil {
			tcp.Close()
			return fmt.Errorf("TLS certificate: %w", err)
		}
		tlsConfig.GetCertificate = certs.GetCertificate
	}
	startup.Ready(log.Info().Str("addr", ln.Addr().String()).Str("scheme", scheme).Int("max_connections", maxConns).Uint64("fd_limit", nofile), cfg.bundle, rl).Msg("serving")
	go rl.Run(ctx)
	// The SIGHUP loop ends before run returns, as the server does: a check
	// it started is not left running past the shutdown.
	hupCtx, stopHup := context.WithCancel(ctx)
	hupDone := make(chan struct{})
	go func() {
		defer close(hupDone)
		checkOnHangup(hupCtx, hup, rl, log)
	}()
	defer func() {
		stopHup()
		<-hupDone
	}()
	if scheme == "http" {
		log.Warn().Msg("serving plain HTTP: kube-apiserver only calls webhooks over HTTPS; set --tls-cert and --tls-key (or terminate TLS in front)")
	}

	errc := make(chan error, 1)
	go func() {
		if scheme == "https" {
			errc <- srv.ServeTLS(ln, "", "") // the certificate: tlsConfig.GetCertificate
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// checkOnHangup checks the policy store at once on each SIGHUP, whatever
// the refresh interval (0 included): what a sidecar that watches a mounted
// ConfigMap, or an operator who just pushed, sends. A check is what a
// refresh does: a bundle that does not load leaves the one serving. Its
// outcome is logged; SIGHUPs that arrive during a check are one more.
func checkOnHangup(ctx context.Context, hup <-chan os.Signal, rl *reload.Reloader, log zerolog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		before := rl.BundleID()
		err := rl.Load(ctx)
		after := rl.BundleID()
		e := log.Info()
		if err != nil {
			e = log.Warn().Err(err)
		}
		e.Str("bundle", after).Bool("changed", after != before).Msg("policy store checked on SIGHUP")
	}
}

// singleDashLongFlag refuses a long flag written with one dash (-policies):
// pflag would read it as -p olicies.
func singleDashLongFlag(fs *pflag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if name == "help" || fs.Lookup(name) != nil {
			return usagef("%s: long flags take two dashes: -%s", a, a)
		}
	}
	return nil
}

// envInt is an integer flag's default from the environment; a value that
// does not parse is left for the flag to report.
func envInt(getenv func(string) string, name string, def int) int {
	if n, err := strconv.Atoi(getenv(name)); err == nil {
		return n
	}
	return def
}

// envDuration is a duration flag's default from the environment; a value
// that does not parse is left for the flag to report.
func envDuration(getenv func(string) string, name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// access builds what guards the review routes: path tokens, bearer tokens
// and basic users (what kube-apiserver's admission kubeconfig can send), and
// the TLS configuration, with client-certificate verification when a client
// CA is set.
func access(cfg config) ([]httpadapter.Option, *tls.Config, error) {
	opts := []httpadapter.Option{httpadapter.WithPathTokens(cfg.tokens...)}
	var auths httpadapter.AnyOf
	if cfg.tokensFile != "" {
		lines, err := readLines(cfg.tokensFile)
		if err != nil {
			return nil, nil, err
		}
		a, err := httpadapter.NewBearerTokens(lines)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cfg.tokensFile, err)
		}
		auths = append(auths, a)
	}
	if cfg.basicFile != "" {
		lines, err := readLines(cfg.basicFile)
		if err != nil {
			return nil, nil, err
		}
		users := map[string]string{}
		for i, l := range lines {
			name, pw, ok := strings.Cut(l, ":")
			if !ok {
				return nil, nil, fmt.Errorf("%s: line %d: want user:password", cfg.basicFile, i+1)
			}
			users[name] = pw
		}
		a, err := httpadapter.NewBasicUsers(users)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cfg.basicFile, err)
		}
		auths = append(auths, a)
	}
	var auth httpadapter.Authenticator
	if len(auths) > 0 {
		auth = auths
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.clientCA != "" {
		pem, err := os.ReadFile(cfg.clientCA)
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: no PEM certificates", cfg.clientCA)
		}
		tlsConfig.ClientCAs = pool
		// A certificate, when sent, must verify in the handshake; whether
		// one is required is the route's business: reviews, /metrics and
		// the detailed /readyz need one, /healthz and the bare /readyz do
		// not, so platform probes work without.
		tlsConfig.ClientAuth = tls.VerifyClientCertIfGiven
		if auth == nil {
			auth = httpadapter.ClientCertificates{}
		} else {
			auth = httpadapter.AllOf{httpadapter.ClientCertificates{}, auth}
		}
	}
	if auth != nil {
		opts = append(opts, httpadapter.WithAuthenticator(auth))
	}
	return opts, tlsConfig, nil
}

// readLines reads a secrets file: one entry per non-empty line, comments
// (#) skipped.
func readLines(name string) ([]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}
