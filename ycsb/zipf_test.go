package ycsb

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// testRand returns a generator seeded with the -seed of internal/testseed
// and logs the seed.
func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewPCG(testseed.Seed(t), 0))
}

// scaled returns n draws, or a fifth of them with -short (the tolerances
// of within scale with the draws).
func scaled(n int) int {
	if testing.Short() {
		return n / 5
	}
	return n
}

// within fails unless the observed count of an event of probability p in n
// draws is within 5 standard deviations of n·p.
func within(t *testing.T, what string, count, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if d := math.Abs(float64(count) - mean); d > 5*sd+1 {
		t.Errorf("%s: %d of %d draws, want %.0f ± %.0f (p = %.5f)", what, count, n, mean, 5*sd, p)
	}
}

func TestZetaMatchesYCSB(t *testing.T) {
	if got := Zeta(scrambledItems, 0.99); math.Abs(got-scrambledZeta)/scrambledZeta > 1e-10 {
		t.Errorf("Zeta(1e10, 0.99) = %.14f, YCSB's ZETAN is %.14f", got, scrambledZeta)
	}
	for _, theta := range []float64{0.5, 0.99, 1.2} {
		for _, n := range []uint64{1, 2, 1000, zetaExactTerms, 1_000_000} {
			var want float64
			for i := range n {
				want += 1 / math.Pow(float64(i+1), theta)
			}
			if got := Zeta(n, theta); math.Abs(got-want)/want > 1e-12 {
				t.Errorf("Zeta(%d, %v) = %.15f, direct sum %.15f", n, theta, got, want)
			}
		}
	}
	// Growing a constant incrementally gives the constant of the larger n.
	a := zetaFrom(1000, 2_000_000, 0.99, Zeta(1000, 0.99))
	if b := Zeta(2_000_000, 0.99); math.Abs(a-b)/b > 1e-12 {
		t.Errorf("incremental zeta %.15f != %.15f", a, b)
	}
}

// grayProb is the probability that Gray et al.'s algorithm (as YCSB codes
// it) draws rank k of n: ranks 0 and 1 follow Zipf's law exactly, higher
// ranks come from inverting an approximate CDF.
func grayProb(k, n uint64, theta float64) float64 {
	zetan := Zeta(n, theta)
	switch k {
	case 0:
		return 1 / zetan
	case 1:
		return math.Pow(0.5, theta) / zetan
	}
	eta := (1 - math.Pow(2/float64(n), 1-theta)) / (1 - Zeta(2, theta)/zetan)
	// Draw u gives rank floor(n·(eta·u − eta + 1)^(1/(1−θ))), so rank < k
	// iff u < cdf(k).
	cdf := func(k uint64) float64 {
		return max((math.Pow(float64(k)/float64(n), 1-theta)-1+eta)/eta, (1+math.Pow(0.5, theta))/zetan)
	}
	return max(cdf(k+1)-cdf(k), 0)
}

func TestZipfianTopRanks(t *testing.T) {
	r := testRand(t)
	draws := scaled(1_000_000)
	for _, n := range []uint64{1000, 100_000} {
		z := NewZipfian(0, n-1, DefaultZipfTheta)
		counts := make(map[uint64]int)
		for range draws {
			v := z.Next(r)
			if v >= n+1 { // YCSB's formula may return n itself, never more
				t.Fatalf("draw %d outside [0, %d]", v, n)
			}
			counts[v]++
		}
		for k := range uint64(10) {
			within(t, "rank", counts[k], draws, grayProb(k, n, DefaultZipfTheta))
		}
		// Ranks 0 and 1 follow Zipf's law itself.
		for k := range uint64(2) {
			p := 1 / math.Pow(float64(k+1), DefaultZipfTheta) / Zeta(n, DefaultZipfTheta)
			within(t, "zipf law", counts[k], draws, p)
		}
	}
}

func TestScrambledZipfianHotKeys(t *testing.T) {
	r := testRand(t)
	const n = 1_000_000
	draws := scaled(1_000_000)
	s := NewScrambledZipfian(0, n-1, DefaultZipfTheta)
	counts := make(map[uint64]int)
	for range draws {
		v := s.Next(r)
		if v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		counts[v]++
	}
	// The hottest keys are the hashes of the Zipfian's top ranks over 10^10
	// items; other ranks land on them with probability about 1/n.
	for k := range uint64(5) {
		within(t, "scrambled rank", counts[FNVHash64(k)%n], draws, grayProb(k, scrambledItems, DefaultZipfTheta))
	}
}

func TestLatest(t *testing.T) {
	r := testRand(t)
	const records = 10_000
	draws := scaled(300_000)
	w, _ := Preset("d")
	g, err := NewGenerator(w, KeyInt, records, 1000)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Stream(r.Uint64())
	counts := make(map[uint64]int)
	for range draws {
		counts[s.nextKeynum()]++
	}
	// keynum = last − zipf(last): the newest record is rank 0.
	last := uint64(records - 1)
	for k := range uint64(4) {
		within(t, "latest rank", counts[last-k], draws, grayProb(k, records-1, DefaultZipfTheta))
	}
	// Acknowledged inserts become the newest records; unacknowledged ones
	// are never chosen.
	a, b := Op{seq: records + 1}, Op{seq: records + 2}
	g.nextSeq += 2
	g.Ack(b)
	if got := g.lastAcked(); got != last {
		t.Fatalf("after acking record %d alone lastAcked = %d, want %d", records+1, got, last)
	}
	g.Ack(a)
	if got := g.lastAcked(); got != last+2 {
		t.Fatalf("after acking both lastAcked = %d, want %d", got, last+2)
	}
	hits := 0
	for range draws {
		if s.nextKeynum() == last+2 {
			hits++
		}
	}
	within(t, "newest record after inserts", hits, draws, 1/Zeta(records+1, DefaultZipfTheta))
}

func TestScanLengthsUniform(t *testing.T) {
	r := testRand(t)
	w, _ := Preset("e")
	g, err := NewGenerator(w, KeyInt, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Stream(r.Uint64())
	draws := scaled(200_000)
	var counts [101]int
	scans := 0
	for range draws {
		op := s.Next()
		if op.Kind != OpScan {
			continue
		}
		if op.ScanLength < 1 || op.ScanLength > 100 {
			t.Fatalf("scan length %d outside 1..100", op.ScanLength)
		}
		counts[op.ScanLength]++
		scans++
	}
	within(t, "scans", scans, draws, 0.95)
	// χ² with 99 degrees of freedom: mean 99, standard deviation 14.
	var chi2 float64
	exp := float64(scans) / 100
	for l := 1; l <= 100; l++ {
		chi2 += (float64(counts[l]) - exp) * (float64(counts[l]) - exp) / exp
	}
	if chi2 > 99+5*14 {
		t.Errorf("scan lengths are not uniform: χ² = %.1f with 99 degrees of freedom", chi2)
	}
}

func TestHotspot(t *testing.T) {
	r := testRand(t)
	const n, draws = 1000, 200_000
	h := NewHotspot(0, n-1, 0.2, 0.8)
	var hot int
	var cold [8]int
	for range draws {
		v := h.Next(r)
		if v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		if v < n/5 {
			hot++
		} else {
			cold[(v-n/5)*8/(n-n/5)]++
		}
	}
	within(t, "hot set", hot, draws, 0.8)
	for i, c := range cold {
		within(t, "cold eighth "+string(rune('0'+i)), c, draws, 0.2/8)
	}
}

func TestUniformStaysInRecords(t *testing.T) {
	w := Workload{Name: "u", Read: 1, Distribution: DistUniform}
	g, err := NewGenerator(w, KeyInt, 50, 10)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Stream(testseed.Base())
	seen := make(map[uint64]bool)
	for range 10_000 {
		n := s.nextKeynum()
		if n >= 50 {
			t.Fatalf("uniform draw %d outside the 50 records", n)
		}
		seen[n] = true
	}
	if len(seen) != 50 {
		t.Errorf("uniform draws hit %d of 50 records", len(seen))
	}
}
