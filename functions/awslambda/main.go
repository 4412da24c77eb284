// Command awslambda is admitfn's AWS Lambda function: the `bootstrap` of a
// provided.al2023 runtime, behind a Function URL or an API Gateway. It builds
// the engine once per cold start and serves every invocation with it. Its
// configuration (the ADMITFN_* variables, GOMEMLIMIT, GOGC, GOMAXPROCS) is in
// docs/aws-lambda.md.
//
// A bundle in a directory that does not load fails the cold start; one in
// S3 that cannot be read does not: reviews fail (the webhook's failurePolicy
// decides) or the fallback serves, and later invocations retry.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/awslambda"
	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/core/version"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/cluster"
	"github.com/admitfn/admitfn/functions/cluster/eksauth"
	"github.com/admitfn/admitfn/functions/internal/logging"
	"github.com/admitfn/admitfn/functions/internal/memlimit"
	"github.com/admitfn/admitfn/functions/internal/startup"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version.Get())
		return
	}
	h, err := initialize(os.Getenv, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admitfn:", err)
		os.Exit(1)
	}
	lambda.Start(h)
}

// initialize is the cold start: configuration, logger, bundle and engine.
// A failure after the Runtime API is known is reported to it as an init
// error, so Lambda says why the function cannot start.
func initialize(getenv func(string) string, stdout io.Writer) (*awslambda.Handler, error) {
	start := time.Now()
	api := getenv("AWS_LAMBDA_RUNTIME_API")
	if api == "" {
		return nil, errors.New("AWS_LAMBDA_RUNTIME_API is not set: this is the bootstrap of a Lambda function (provided.al2023); to run admitfn elsewhere use functions/server")
	}
	log, err := newLogger(getenv, stdout)
	if err != nil {
		return nil, initError(api, "Runtime.ConfigError", err)
	}
	tokens, err := httpadapter.ParseTokens(getenv("ADMITFN_TOKENS"))
	if err != nil {
		return nil, initError(api, "Runtime.ConfigError", fmt.Errorf("ADMITFN_TOKENS: %w", err))
	}
	cfg, err := startup.ConfigFromEnv(getenv, filepath.Join(getenv("LAMBDA_TASK_ROOT"), "policies"))
	if err != nil {
		return nil, initError(api, "Runtime.ConfigError", err)
	}
	_, cfg.PublicKeySet = os.LookupEnv("ADMITFN_BUNDLE_PUBLIC_KEY")
	// S3 only: the GCS client would add megabytes and milliseconds to
	// every cold start.
	cfg.Open = startup.OpenWith(map[string]startup.Opener{"s3": func(ctx context.Context, loc store.Location) (store.Bucket, error) {
		return s3store.Open(ctx, loc, s3store.Options{PathStyle: cfg.S3PathStyle})
	}})
	limit := startup.MemoryLimit(getenv, log, memlimit.Lambda(getenv))
	// Lambda allows 10 s for the whole init phase.
	cfg.InitTimeout = 5 * time.Second
	cfg.MemoryLimit = limit
	// Once the bundle is compiled and its background work done.
	if procs := memlimit.LambdaProcs(getenv); procs > 0 {
		cfg.Settled = func() {
			runtime.GOMAXPROCS(procs)
			log.Info().Int("gomaxprocs", procs).Msg("invocations run on one P: the function has less than one vCPU")
		}
	}
	// EKS tokens only, for the reason above.
	clusters, err := startup.Clusters(getenv("ADMITFN_CLUSTERS"), cluster.Authenticators{EKS: eksauth.Tokens}, log)
	if err != nil {
		return nil, initError(api, "Runtime.ConfigError", err)
	}
	rl, err := startup.Start(context.Background(), cfg, log)
	if err != nil {
		errorType := "Runtime.BundleError"
		if errors.Is(err, startup.ErrConfig) {
			errorType = "Runtime.ConfigError"
		}
		log.Error().Err(err).Msg("cannot load the policy bundle")
		return nil, initError(api, errorType, err)
	}
	startup.Ready(log.Info(), cfg, rl).Float64("init_ms", float64(time.Since(start).Microseconds())/1000).Msg("ready")
	// One CloudWatch Embedded Metric Format line per review.
	rec := metrics.NewEMF(log, startup.Metrics(rl))
	return awslambda.New(httpadapter.New(rl, log, httpadapter.WithPathTokens(tokens...), httpadapter.WithMetrics(rec), httpadapter.WithLimits(httpadapter.LimitsFor(limit.Bytes)), httpadapter.WithClusters(clusters)), log), nil
}

// newLogger writes the JSON lines CloudWatch's JSON log format reads:
// `timestamp` in RFC 3339, `level`, `message`.
func newLogger(getenv func(string) string, w io.Writer) (zerolog.Logger, error) {
	name := getenv("ADMITFN_LOG_LEVEL")
	if name == "" {
		name = strings.ToLower(getenv("AWS_LAMBDA_LOG_LEVEL"))
	}
	level, err := logging.Level(name)
	if err != nil {
		return zerolog.Logger{}, err
	}
	logging.QuietLibraries()
	zerolog.TimestampFieldName = "timestamp"
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// initError reports err to the Runtime API's init error endpoint (which
// aws-lambda-go does not do) and returns it.
func initError(api, errorType string, err error) error {
	body, _ := json.Marshal(struct {
		ErrorMessage string   `json:"errorMessage"`
		ErrorType    string   `json:"errorType"`
		StackTrace   []string `json:"stackTrace"`
	}{err.Error(), errorType, []string{}})
	req, reqErr := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if reqErr != nil {
		return fmt.Errorf("%w (and the init error could not be reported: %v)", err, reqErr)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", errorType)
	resp, postErr := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if postErr != nil {
		return fmt.Errorf("%w (and the init error could not be reported: %v)", err, postErr)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("%w (and the Runtime API answered the init error with HTTP %d)", err, resp.StatusCode)
	}
	return err
}
