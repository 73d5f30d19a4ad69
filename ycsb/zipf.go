package ycsb

import (
	"math"
	"math/rand/v2"
)

// Zipfian constants of YCSB's ZipfianGenerator and ScrambledZipfianGenerator.
const (
	// DefaultZipfTheta is YCSB's default Zipfian constant.
	DefaultZipfTheta = 0.99
	// scrambledItems is ScrambledZipfianGenerator.ITEM_COUNT: the scrambled
	// generator draws from a Zipfian over 10^10 items and hashes the draw
	// into the key space, so the popularity of a key does not depend on the
	// key space's size.
	scrambledItems = 10_000_000_000
	// scrambledZeta is ScrambledZipfianGenerator.ZETAN, zeta(10^10, 0.99),
	// precomputed by YCSB.
	scrambledZeta = 26.46902820178302
	// zetaExactTerms is how many terms Zeta sums one by one before it
	// switches to the Euler–Maclaurin formula for the tail.
	zetaExactTerms = 1 << 16
)

// Zeta returns the generalized harmonic number sum_{i=1..n} 1/i^theta, the
// normalisation constant of a Zipfian over n items (YCSB's zetastatic).
// The first 2^16 terms are summed as YCSB does; the tail uses the
// Euler–Maclaurin formula, whose error there is below 1e-20, so that
// constants over billions of items cost microseconds instead of minutes.
func Zeta(n uint64, theta float64) float64 {
	return zetaFrom(0, n, theta, 0)
}

// zetaFrom returns initial + sum_{i=st+1..n} 1/i^theta (YCSB's
// zeta(st, n, theta, initialsum), used to grow a constant incrementally).
func zetaFrom(st, n uint64, theta, initial float64) float64 {
	sum := initial
	i := st
	for ; i < n && i < zetaExactTerms; i++ {
		sum += 1 / math.Pow(float64(i+1), theta)
	}
	if i >= n {
		return sum
	}
	return sum + eulerMaclaurin(float64(i+1), float64(n), theta)
}

// eulerMaclaurin approximates sum_{i=a..b} i^-theta for large a.
func eulerMaclaurin(a, b, theta float64) float64 {
	f := func(x float64) float64 { return math.Pow(x, -theta) }
	d1 := func(x float64) float64 { return -theta * math.Pow(x, -theta-1) }
	d3 := func(x float64) float64 { return -theta * (theta + 1) * (theta + 2) * math.Pow(x, -theta-3) }
	var integral float64
	if theta == 1 {
		integral = math.Log(b / a)
	} else {
		// (b^(1-θ) - a^(1-θ)) / (1-θ) without cancellation for θ near 1.
		integral = math.Pow(a, 1-theta) * math.Expm1((1-theta)*math.Log(b/a)) / (1 - theta)
	}
	return integral + (f(a)+f(b))/2 + (d1(b)-d1(a))/12 - (d3(b)-d3(a))/720
}

// Zipfian is YCSB's ZipfianGenerator (Gray et al., "Quickly generating
// billion-record synthetic databases", SIGMOD'94): integers in
// [base, base+items) with P(base+i) proportional to 1/(i+1)^theta, so base
// is the most popular. It is not safe for concurrent use; NextN mutates the
// cached constant when the item count grows.
type Zipfian struct {
	items, base  uint64
	theta, alpha float64
	zeta2, zetan float64
	eta          float64
	countForZeta uint64
}

// NewZipfian returns a Zipfian over [lo, hi] with exponent theta (0 < theta,
// theta != 1).
func NewZipfian(lo, hi uint64, theta float64) *Zipfian {
	return newZipfian(lo, hi, theta, Zeta(hi-lo+1, theta))
}

func newZipfian(lo, hi uint64, theta, zetan float64) *Zipfian {
	z := &Zipfian{items: hi - lo + 1, base: lo, theta: theta, zetan: zetan}
	z.zeta2 = Zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	z.countForZeta = z.items
	z.eta = (1 - math.Pow(2/float64(z.items), 1-theta)) / (1 - z.zeta2/zetan)
	return z
}

// Next returns a draw over all items.
func (z *Zipfian) Next(r *rand.Rand) uint64 { return z.NextN(r, z.items) }

// NextN is YCSB's nextLong(itemcount): a draw from base+[0, itemcount]. When
// itemcount grew since the last call the normalisation constant is extended
// incrementally; like YCSB, eta keeps using the item count given at
// construction (ZipfianGenerator recomputes it with the field items). A
// smaller itemcount reuses the larger constant, as YCSB does by default
// (allowitemcountdecrease=false).
func (z *Zipfian) NextN(r *rand.Rand, itemcount uint64) uint64 {
	if itemcount > z.countForZeta {
		z.zetan = zetaFrom(z.countForZeta, itemcount, z.theta, z.zetan)
		z.countForZeta = itemcount
		z.eta = (1 - math.Pow(2/float64(z.items), 1-z.theta)) / (1 - z.zeta2/z.zetan)
	}
	u := r.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return z.base
	}
	if uz < 1+math.Pow(0.5, z.theta) {
		return z.base + 1
	}
	return z.base + uint64(float64(itemcount)*math.Pow(z.eta*u-z.eta+1, z.alpha))
}

// clone returns an independent copy (generators are per client).
func (z *Zipfian) clone() *Zipfian { c := *z; return &c }

// ScrambledZipfian is YCSB's ScrambledZipfianGenerator: a Zipfian over 10^10
// items whose draw is hashed (FNVHash64) into [lo, hi], so popular keys are
// scattered over the key space instead of clustered at its start.
type ScrambledZipfian struct {
	z     *Zipfian
	lo, n uint64
}

// NewScrambledZipfian returns a scrambled Zipfian over [lo, hi]. For
// theta = 0.99 it uses YCSB's precomputed constant; otherwise Zeta.
func NewScrambledZipfian(lo, hi uint64, theta float64) *ScrambledZipfian {
	zetan := scrambledZeta
	if theta != DefaultZipfTheta {
		zetan = Zeta(scrambledItems, theta)
	}
	return &ScrambledZipfian{z: newZipfian(0, scrambledItems-1, theta, zetan), lo: lo, n: hi - lo + 1}
}

// Next returns a draw in [lo, hi].
func (s *ScrambledZipfian) Next(r *rand.Rand) uint64 {
	return s.lo + FNVHash64(s.z.Next(r))%s.n
}

// Hotspot is YCSB's HotspotIntegerGenerator: with probability opnFraction a
// uniform draw from the first setFraction of [lo, hi] (the hot set),
// otherwise a uniform draw from the rest.
type Hotspot struct {
	lo, hot, cold uint64
	opnFraction   float64
}

// NewHotspot returns a hotspot generator over [lo, hi]. YCSB's defaults are
// setFraction 0.2 and opnFraction 0.8.
func NewHotspot(lo, hi uint64, setFraction, opnFraction float64) *Hotspot {
	n := hi - lo + 1
	hot := uint64(float64(n) * setFraction)
	return &Hotspot{lo: lo, hot: hot, cold: n - hot, opnFraction: opnFraction}
}

// Next returns a draw in [lo, hi].
func (h *Hotspot) Next(r *rand.Rand) uint64 {
	if h.hot > 0 && (r.Float64() < h.opnFraction || h.cold == 0) {
		return h.lo + r.Uint64N(h.hot)
	}
	return h.lo + h.hot + r.Uint64N(h.cold)
}
