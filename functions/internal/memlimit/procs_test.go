package memlimit

import "testing"

// Invocations run on one P below one vCPU's worth of memory, unless
// GOMAXPROCS is set or the function serves several invocations at once.
func TestInvocationProcs(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"}, 1},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 1},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1768"}, 1},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}, 0},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240"}, 0},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "AWS_LAMBDA_MAX_CONCURRENCY": "1"}, 1},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "AWS_LAMBDA_MAX_CONCURRENCY": "16"}, 0},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMAXPROCS": "2"}, 0},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0},
		{map[string]string{}, 0},
	} {
		if got := LambdaProcs(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: %d, want %d", c.env, got, c.want)
		}
	}
}
