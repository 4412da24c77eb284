package perf_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/perf"
)

// docs/cost.md's bill is what its measured billed times cost at the
// prices perf holds, for every size BenchmarkCost measures, and the prices
// it states are those.
func TestCostDoc(t *testing.T) {
	data, err := os.ReadFile("../../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	rows := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) == 8 && (cells[0] == "Lambda" || cells[0] == "Cloud Functions") {
			rows[cells[0]+" "+cells[1]] = cells
		}
	}
	check := func(key string, vcpu float64, usd func(billed float64) float64) {
		r, ok := rows[key]
		if !ok {
			t.Errorf("docs/cost.md has no row for %s", key)
			return
		}
		billed, err := strconv.ParseFloat(r[6], 64)
		if err != nil {
			t.Errorf("%s: billed %q", key, r[6])
			return
		}
		if got, want := r[7], fmt.Sprintf("%.4f", usd(billed)); got != want {
			t.Errorf("%s: USD per million %s, but %s billed ms costs %s", key, got, r[6], want)
		}
		if got, want := r[2], strconv.FormatFloat(vcpu, 'f', -1, 64); got != want {
			t.Errorf("%s: vCPU %s, want %s", key, got, want)
		}
	}
	for _, mb := range perf.LambdaSizes {
		check(fmt.Sprintf("Lambda %d MB", mb), float64(int(float64(mb)/perf.LambdaFullCPUMB*1000+0.5))/1000, func(billed float64) float64 { return perf.LambdaUSDPerMillion(mb, billed) })
	}
	for _, tier := range perf.GCFTiers {
		check("Cloud Functions "+tier.Memory, tier.VCPU, func(billed float64) float64 { return perf.GCFUSDPerMillion(tier, billed) })
	}
	if len(rows) != len(perf.LambdaSizes)+len(perf.GCFTiers) {
		t.Errorf("%d rows, want one per size measured", len(rows))
	}
	for _, price := range []string{
		fmt.Sprintf("| %s | %s per GB (1,024 MB)", strconv.FormatFloat(perf.LambdaRequestUSD, 'f', -1, 64), strconv.FormatFloat(perf.LambdaGBSecondUSD, 'f', -1, 64)),
		fmt.Sprintf("| %s | %s per vCPU + %s per GiB", strconv.FormatFloat(perf.GCFRequestUSD, 'f', -1, 64), strconv.FormatFloat(perf.GCFVCPUSecondUSD, 'f', -1, 64), strconv.FormatFloat(perf.GCFGiBSecondUSD, 'f', -1, 64)),
	} {
		if !strings.Contains(doc, price) {
			t.Errorf("docs/cost.md does not state the price %q", price)
		}
	}
}
