// Command runlambda runs the Lambda bootstrap on this machine as AWS runs
// it behind a Function URL (make run-lambda): a Runtime API stand-in, the
// bootstrap polling it as a process with AWS_LAMBDA_RUNTIME_API set, and a
// Function URL front on -addr that turns each HTTP request into a payload
// 2.0 event, as AWS documents them. The same stand-ins run the bootstrap
// in the tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "where the Function URL listens")
	bootstrap := flag.String("bootstrap", "", "the bootstrap binary (required)")
	timeout := flag.Duration("timeout", 8*time.Second, "the function's timeout")
	flag.Parse()
	if *bootstrap == "" {
		fmt.Fprintln(os.Stderr, "runlambda: -bootstrap is required")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = serve(ctx, ln, *bootstrap, *timeout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runlambda:", err)
		os.Exit(1)
	}
}

// serve runs bootstrap behind a Function URL on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, bootstrap string, timeout time.Duration) error {
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		return err
	}
	defer api.Close()
	cmd := exec.Command(bootstrap)
	// The function's environment is this one's (ADMITFN_POLICIES, tokens,
	// AWS credentials for an S3 bundle) plus what Lambda sets.
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+api.Addr, "AWS_LAMBDA_FUNCTION_NAME=admitfn", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	srv := &http.Server{Handler: &lambdatest.FunctionURL{Function: api, Timeout: timeout, URLID: "local", Region: "local"}, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "runlambda: %s behind a Function URL on http://%s\n", bootstrap, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case fe := <-api.InitErrors():
		srv.Close()
		return fmt.Errorf("the function failed to start: %v", fe)
	case err := <-errc:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
