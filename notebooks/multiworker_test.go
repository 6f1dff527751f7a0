package notebooks

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var checksumRe = regexp.MustCompile(`worker (\d) of (\d): per-worker batch (\d+), loss ([0-9.]+), weights checksum ([0-9.]+)`)

// checkTwoWorkers checks 05-two-workers.ipynb: two worker processes started by %%distributed
// see their TF_CONFIG, train MNIST with per-worker batch 32 and end with the weights of one
// worker with batch 64.
func checkTwoWorkers(t *testing.T, nb *notebook) {
	wantNoErrors(t, nb)
	wantOutput(t, nb, findCell(t, nb, "NewTFConfigClusterResolver"), `(?m)^\[worker 0\] task worker 0 of cluster \{'worker': \['127\.0\.0\.1:\d+', '127\.0\.0\.1:\d+'\]\}$`)
	wantOutput(t, nb, findCell(t, nb, "NewTFConfigClusterResolver"), `(?m)^\[worker 1\] task worker 1 of cluster `)
	two := findCell(t, nb, "%%distributed --workers 2\nimport (\n\t\"fmt\"\n\t\"math\"")
	one := -1 // the same code in the notebook's own process
	for i, c := range nb.Cells {
		if c.Type == "code" && strings.HasPrefix(c.Source, "import (\n\t\"fmt\"\n\t\"math\"") {
			one = i
		}
	}
	sums := map[string]float64{}
	for _, i := range []int{two, one} {
		for _, m := range checksumRe.FindAllStringSubmatch(cellAt(t, nb, i).Text(), -1) {
			v, _ := strconv.ParseFloat(m[5], 64)
			sums[m[1]+"/"+m[2]+"/"+m[3]] = v
		}
	}
	a, b, c := sums["0/2/32"], sums["1/2/32"], sums["0/1/64"]
	if a == 0 || b == 0 || c == 0 {
		t.Fatalf("missing checksums: got %v, want workers 0/2, 1/2 (batch 32) and 0/1 (batch 64)", sums)
	}
	if a != b {
		t.Errorf("the two workers' weights checksums differ: %g and %g", a, b)
	}
	if math.Abs(a-c) > 1e-5*c {
		t.Errorf("two workers (batch 32 each) checksum %g, one worker (batch 64) %g; want equal within 1e-5", a, c)
	}
	checkElasticSection(t, nb)
}

var elasticRe = regexp.MustCompile(`\[worker (\d)\] task worker (\d) \(now worker (\d) of (\d)\): loss ([0-9.]+), weights checksum ([0-9.]+)`)

// checkElasticSection checks the notebook's elastic section: of 3 workers, worker 2 is
// killed in the first epoch; the launcher reports the loss, the others log which worker left
// after which step, finish as workers 0 and 1 of 2 with equal weights, and the panel
// marks worker 2 lost.
func checkElasticSection(t *testing.T, nb *notebook) {
	i := findCell(t, nb, "%%distributed --workers 3 --elastic 2")
	wantOutput(t, nb, i, `(?m)^\[launch\] task worker 2 lost at \d\d:\d\d:\d\d\.\d{3}: signal: killed; the job goes on with 2 chief and worker tasks \(at least 2\)$`)
	wantOutput(t, nb, i, `(?m)^\[worker [01]\] WARNING:distribute:worker 2 \(127\.0\.0\.1:\d+\) lost; the 2 remaining workers go on after step \d+ \(this is worker [01] of 2 now; regrouped in [0-9.]+[mµn]?s\)$`)
	wantOutput(t, nb, i, `(?m)^worker 2 +127\.0\.0\.1:\d+ +lost\b`)
	sums := map[string]string{}
	for _, m := range elasticRe.FindAllStringSubmatch(cellAt(t, nb, i).Text(), -1) {
		if m[1] != m[2] || m[3] != m[1] || m[4] != "2" {
			t.Errorf("line %q: want task worker N (now worker N of 2)", m[0])
		}
		sums[m[1]] = m[6]
	}
	if sums["0"] == "" || sums["0"] != sums["1"] || sums["2"] != "" {
		t.Errorf("the workers' checksums %v: want workers 0 and 1 only, equal", sums)
	}
}
