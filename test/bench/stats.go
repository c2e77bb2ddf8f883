package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// samples are the durations of repeated runs of one measurement.
type samples []time.Duration

// percentile is the nearest-rank percentile p (0 < p <= 1). With fewer than
// 100 samples p99 is the slowest run.
func (s samples) percentile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (s samples) median() time.Duration { return s.percentile(0.5) }
func (s samples) p99() time.Duration    { return s.percentile(0.99) }

// mean is the runs' average (0 with none). With two runs the nearest-rank
// median is the faster one, so comparisons of two-run and three-run
// measurements also give the means.
func (s samples) mean() time.Duration {
	if len(s) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s))
}

// String is "median X, p99 Y (n runs)".
func (s samples) String() string {
	if len(s) == 0 {
		return "not measured"
	}
	return fmt.Sprintf("median %s, p99 %s (%d runs)", dur(s.median()), dur(s.p99()), len(s))
}

// dur prints a duration in ms below 10 s, in s above.
func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// ratio is a/b as "12x" (or "0.93x").
func ratio(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "–"
	}
	r := float64(a) / float64(b)
	if r >= 10 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// linearFit is the least-squares line y = a + b*x and its R².
func linearFit(xs, ys []float64) (a, b, r2 float64) {
	n := float64(len(xs))
	if n < 2 {
		return 0, 0, 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	b = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	a = (sy - b*sx) / n
	mean := sy / n
	var ssRes, ssTot float64
	for i := range xs {
		e := ys[i] - (a + b*xs[i])
		ssRes += e * e
		ssTot += (ys[i] - mean) * (ys[i] - mean)
	}
	if ssTot == 0 {
		return a, b, 1
	}
	return a, b, 1 - ssRes/ssTot
}
