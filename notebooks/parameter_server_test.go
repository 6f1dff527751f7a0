package notebooks

import (
	"regexp"
	"strconv"
	"testing"
)

var (
	counterRe  = regexp.MustCompile(`counter = (\d+) after (\d+) steps \(want (\d+)\); steps per worker map\[0:(\d+) 1:(\d+)\]; the last step read (\d+)`)
	psAccRe    = regexp.MustCompile(`test accuracy ([0-9.]+)`)
	psLossesRe = regexp.MustCompile(`mean loss of the first 20 steps ([0-9.]+), of the last 20 steps ([0-9.]+)`)
)

// checkParameterServer checks 06-parameter-server.ipynb (course activity 005): the counter
// ends at exactly 2N with steps on both workers, Fit partitions the first kernel over both
// parameter servers and learns, and the coordinator's custom loops (by hand, and with a Keras
// model and optimizer) lower the loss and learn.
func checkParameterServer(t *testing.T, nb *notebook) {
	wantNoErrors(t, nb)
	wantOutput(t, nb, findCell(t, nb, "func startPS()"), `(?m)^cluster: \{'chief': \['127\.0\.0\.1:20000'\], 'ps': \['127\.0\.0\.1:\d+', '127\.0\.0\.1:\d+'\], 'worker': \[`)

	counterCell := findCell(t, nb, "NewClusterCoordinator(strategy)\nfmt.Printf")
	wantOutput(t, nb, counterCell, `(?m)^ParameterServerStrategy: 2 workers, 2 parameter servers$`)
	m := counterRe.FindStringSubmatch(cellAt(t, nb, counterCell).Text())
	if m == nil {
		t.Fatalf("counter cell: no counter line in %q", cellAt(t, nb, counterCell).Text())
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	if n(m[1]) != n(m[3]) || n(m[2]) != n(m[3]) || n(m[3]) != 100 {
		t.Errorf("counter = %s after %s steps, want exactly %s = 2N", m[1], m[2], m[3])
	}
	if n(m[4])+n(m[5]) != 100 || n(m[4]) == 0 || n(m[5]) == 0 {
		t.Errorf("steps per worker %s and %s: want both workers used, 100 in all", m[4], m[5])
	}
	if last := n(m[6]); last < 1 || last > 100 {
		t.Errorf("the last step read %d, want 1..100", last)
	}

	fit := findCell(t, nb, "WithVariablePartitioner(partitioner)")
	wantOutput(t, nb, fit, `(?m)^\S*dense\S*kernel\S* +shape \[784 32\]: 2 shard\(s\)  \[rows 0-391 on ps \d\]  \[rows 392-783 on ps \d\]$`)
	wantOutput(t, nb, fit, `(?m)^\S*bias\S* +shape \[10\]: 1 shard\(s\)`)
	wantOutput(t, nb, fit, `(?m)^loss per epoch \[[0-9.]+ [0-9.]+\]$`)
	wantAccuracy(t, nb, fit, 0.8)

	loop := findCell(t, nb, "func fetchMean(")
	if l := psLossesRe.FindStringSubmatch(cellAt(t, nb, loop).Text()); l == nil {
		t.Errorf("custom loop: no loss line in %q", cellAt(t, nb, loop).Text())
	} else if first, _ := strconv.ParseFloat(l[1], 64); func() bool { last, _ := strconv.ParseFloat(l[2], 64); return !(last < 0.7*first) }() {
		t.Errorf("custom loop: mean loss %s over the first steps, %s over the last: want it to fall by 30%%", l[1], l[2])
	}
	wantAccuracy(t, nb, loop, 0.8)

	// The same loop with a Keras model made in the scope: its variables live on the ps and
	// the Keras optimizer's ApplyGradients trains them there.
	kloop := findCell(t, nb, "kmodel.Call(x, true)")
	wantOutput(t, nb, kloop, `(?m)^4 variables on the parameter servers$`)
	if l := psLossesRe.FindStringSubmatch(cellAt(t, nb, kloop).Text()); l == nil {
		t.Errorf("Keras custom loop: no loss line in %q", cellAt(t, nb, kloop).Text())
	} else if first, _ := strconv.ParseFloat(l[1], 64); func() bool { last, _ := strconv.ParseFloat(l[2], 64); return !(last < 0.7*first) }() {
		t.Errorf("Keras custom loop: mean loss %s over the first steps, %s over the last: want it to fall by 30%%", l[1], l[2])
	}
	wantAccuracy(t, nb, kloop, 0.8)

	// The tutorial's example: StringLookup ids, an Embedding, an L2 penalty from model.Losses.
	words := findCell(t, nb, "featureAndLabelGen(400)")
	wantOutput(t, nb, words, `(?m)^vocabulary \[\[UNK\] avenger ironman batman hulk spiderman kingkong wonder_woman\]$`)
	wantOutput(t, nb, words, `(?m)^training accuracy over the 100 steps 0\.[89]\d\d$`)
	wantOutput(t, nb, words, `(?m)^final accuracy (0\.9[5-9]\d|1\.000)$`)
	wantOutput(t, nb, len(nb.Cells)-1, `parameter servers stopped`)
}

// wantAccuracy checks that cell i printed "test accuracy X" with X >= min.
func wantAccuracy(t *testing.T, nb *notebook, i int, min float64) {
	t.Helper()
	m := psAccRe.FindStringSubmatch(cellAt(t, nb, i).Text())
	if m == nil {
		t.Errorf("cell %d: no test accuracy in %q", i, cellAt(t, nb, i).Text())
		return
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < min {
		t.Errorf("cell %d: test accuracy %.3f, want at least %.2f", i, acc, min)
	}
}
