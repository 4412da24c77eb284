package perf

import (
	"math"
	"time"
)

// What the platforms charge, as BenchmarkCost prices a review and
// docs/cost.md states it: list prices in US dollars, without free tiers,
// savings plans or committed use (AWS Lambda in us-east-1 on arm64, which
// the Terraform module deploys; Cloud Run functions in a Tier 1 region,
// billed per request).
const (
	LambdaRequestUSD  = 0.20 / 1e6   // per request
	LambdaGBSecondUSD = 0.0000133334 // per GB-second (of configured memory; GB = 1,024 MB)
	// LambdaFullCPUMB is the memory at which Lambda gives a function one
	// vCPU; below it, that share of one.
	LambdaFullCPUMB = 1769

	GCFRequestUSD    = 0.40 / 1e6 // per request
	GCFVCPUSecondUSD = 0.000024   // per vCPU-second
	GCFGiBSecondUSD  = 0.0000025  // per GiB-second
)

// LambdaSizes are the memory sizes (MB) BenchmarkCost measures Lambda at:
// the smallest, the Terraform module's default (512) and one full vCPU.
var LambdaSizes = []int{128, 256, 512, 1024, LambdaFullCPUMB}

// GCFTier is a Cloud Functions memory size and the vCPU it comes with.
type GCFTier struct {
	Memory string // as available_memory takes it
	Bytes  int64
	VCPU   float64
}

// GCFTiers are the sizes BenchmarkCost measures Cloud Functions at, with
// the CPU Cloud Functions gives each; the Terraform module's default is
// 512Mi.
var GCFTiers = []GCFTier{
	{"256Mi", 256 << 20, 0.167},
	{"512Mi", 512 << 20, 0.333},
	{"1Gi", 1 << 30, 0.583},
	{"2Gi", 2 << 30, 1},
}

// LambdaBilledMS is what Lambda bills for an invocation that took d:
// rounded up to the millisecond.
func LambdaBilledMS(d time.Duration) float64 {
	return math.Ceil(float64(d) / float64(time.Millisecond))
}

// GCFBilledMS is what Cloud Functions bills an instance for a request that
// took d alone on it (one request at a time): rounded up to 100 ms.
func GCFBilledMS(d time.Duration) float64 {
	return 100 * math.Ceil(float64(d)/float64(100*time.Millisecond))
}

// LambdaUSDPerMillion is the price of a million invocations of mb of
// memory billed billedMS each.
func LambdaUSDPerMillion(mb int, billedMS float64) float64 {
	return 1e6 * (LambdaRequestUSD + float64(mb)/1024*billedMS/1000*LambdaGBSecondUSD)
}

// GCFUSDPerMillion is the price of a million requests to tier billed
// billedMS each.
func GCFUSDPerMillion(tier GCFTier, billedMS float64) float64 {
	gib := float64(tier.Bytes) / (1 << 30)
	return 1e6 * (GCFRequestUSD + billedMS/1000*(tier.VCPU*GCFVCPUSecondUSD+gib*GCFGiBSecondUSD))
}
