package memlimit

// oneVCPUMemoryMB is the memory at which a Lambda function has the
// equivalent of one vCPU (one vCPU-second of credits per second); Lambda
// allocates CPU in proportion to memory.
const oneVCPUMemoryMB = 1769

// LambdaProcs is the GOMAXPROCS to serve invocations with, or 0 to keep
// the runtime's. A function with less than one vCPU of time that serves one
// invocation at a time gets nothing from a second P but the scheduler's
// hand-offs between threads, paid from the same share: with one, a warm
// invocation spends less CPU and takes no longer (BenchmarkWarmInvocations,
// docs/performance.md). Init, and the first bundle's background work,
// keep every P Lambda shows (parsing runs in parallel, and the first
// invocations need not share a P with client-go's schema parse).
// GOMAXPROCS in the environment rules, and a Lambda
// Managed Instances function serving several invocations at once
// (AWS_LAMBDA_MAX_CONCURRENCY) keeps its parallelism.
func LambdaProcs(getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	if c := getenv("AWS_LAMBDA_MAX_CONCURRENCY"); c != "" && c != "1" {
		return 0
	}
	memory, ok, err := Lambda(getenv).Read()
	if err != nil || !ok || memory >= oneVCPUMemoryMB<<20 {
		return 0
	}
	return 1
}
