// Package gcf is admitfn's Google Cloud Function (gen2): its init builds the
// engine once for the instance and registers the HTTP function EntryPoint
// with functions-framework-go. Cloud Functions builds it from the source zip
// of `make gcf`, whose root package imports this one. Its configuration (the
// ADMITFN_* variables, GOMEMLIMIT, GOGC) is in docs/cloud-functions.md.
//
// A bundle in a directory that does not load keeps the instance from
// starting; one in GCS that cannot be read does not: reviews fail (the
// webhook's failurePolicy decides) or the fallback serves, and requests
// retry later. Requests check for a new bundle, because Cloud Functions
// throttles the CPU between them.
package gcf

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/gcf"
	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/cluster"
	"github.com/admitfn/admitfn/functions/cluster/gkeauth"
	"github.com/admitfn/admitfn/functions/internal/logging"
	"github.com/admitfn/admitfn/functions/internal/memlimit"
	"github.com/admitfn/admitfn/functions/internal/startup"
)

// EntryPoint is the function's name: `--entry-point` of
// `gcloud functions deploy`, and FUNCTION_TARGET for local runs.
const EntryPoint = "Admitfn"

func init() {
	h, err := newHandler(os.Getenv, os.Stdout)
	if err != nil {
		// A bundle that does not load keeps the instance from starting, so
		// a bad deploy fails and the serving revision stays.
		fmt.Fprintf(os.Stderr, "{\"severity\":\"CRITICAL\",\"message\":%q}\n", "admitfn cannot start: "+err.Error())
		os.Exit(1)
	}
	functions.HTTP(EntryPoint, h.ServeHTTP)
}

func newHandler(getenv func(string) string, stdout io.Writer) (*gcf.Handler, error) {
	start := time.Now()
	log, err := newLogger(getenv("ADMITFN_LOG_LEVEL"), stdout)
	if err != nil {
		return nil, err
	}
	tokens, err := httpadapter.ParseTokens(getenv("ADMITFN_TOKENS"))
	if err != nil {
		return nil, fmt.Errorf("ADMITFN_TOKENS: %w", err)
	}
	cfg, err := startup.ConfigFromEnv(getenv, defaultPolicies())
	if err != nil {
		return nil, err
	}
	_, cfg.PublicKeySet = os.LookupEnv("ADMITFN_BUNDLE_PUBLIC_KEY")
	// GCS only: the S3 client would add megabytes and milliseconds to
	// every cold start.
	cfg.Open = startup.OpenWith(map[string]startup.Opener{"gs": func(ctx context.Context, loc store.Location) (store.Bucket, error) {
		return gcsstore.Open(ctx, loc)
	}})
	limit := startup.MemoryLimit(getenv, log, memlimit.Cgroup())
	cfg.InitTimeout = 10 * time.Second
	cfg.MemoryLimit = limit
	// GKE tokens only, for the reason above.
	clusters, err := startup.Clusters(getenv("ADMITFN_CLUSTERS"), cluster.Authenticators{GKE: gkeauth.Tokens}, log)
	if err != nil {
		return nil, err
	}
	rl, err := startup.Start(context.Background(), cfg, log)
	if err != nil {
		return nil, err
	}
	startup.Ready(log.Info(), cfg, rl).Float64("init_ms", float64(time.Since(start).Microseconds())/1000).Msg("ready")
	// Metric fields in a log line per review, for log-based metrics.
	rec := metrics.NewLogFields(log, startup.Metrics(rl))
	return gcf.New(httpadapter.New(rl, log, httpadapter.WithPathTokens(tokens...), httpadapter.WithMetrics(rec), httpadapter.WithLimits(httpadapter.LimitsFor(limit.Bytes)), httpadapter.WithClusters(clusters)), log, getenv("GOOGLE_CLOUD_PROJECT")), nil
}

// defaultPolicies is the policies/ directory of the uploaded source: Cloud
// Functions' Go builder leaves the source in serverless_function_source_code
// under the function's working directory; a local run starts in the source
// root itself.
func defaultPolicies() string {
	const deployed = "serverless_function_source_code/policies"
	if fi, err := os.Stat(deployed); err == nil && fi.IsDir() {
		return deployed
	}
	return "policies"
}

// newLogger writes Cloud Logging's structured lines: `severity` in upper
// case, `message`, `time` in RFC 3339.
func newLogger(level string, w io.Writer) (zerolog.Logger, error) {
	lvl, err := logging.Level(level)
	if err != nil {
		return zerolog.Logger{}, err
	}
	zerolog.LevelFieldName = "severity"
	zerolog.LevelFieldMarshalFunc = severity
	logging.QuietLibraries()
	zerolog.TimestampFieldName = "time"
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// severity names zerolog's levels as Cloud Logging's LogSeverity.
func severity(l zerolog.Level) string {
	switch l {
	case zerolog.TraceLevel, zerolog.DebugLevel:
		return "DEBUG"
	case zerolog.InfoLevel:
		return "INFO"
	case zerolog.WarnLevel:
		return "WARNING"
	case zerolog.ErrorLevel:
		return "ERROR"
	case zerolog.FatalLevel:
		return "CRITICAL"
	case zerolog.PanicLevel:
		return "ALERT"
	default:
		return "DEFAULT"
	}
}
