package main

import (
	"testing"
	"time"
)

func TestSamplesMedianAndMean(t *testing.T) {
	for _, c := range []struct {
		s            samples
		median, mean time.Duration
	}{
		{nil, 0, 0},
		{samples{3 * time.Second}, 3 * time.Second, 3 * time.Second},
		// Two runs: the nearest-rank median is the faster one; the mean is between.
		{samples{16 * time.Second, 12 * time.Second}, 12 * time.Second, 14 * time.Second},
		{samples{19 * time.Second, 14 * time.Second, 18 * time.Second}, 18 * time.Second, 17 * time.Second},
	} {
		if got := c.s.median(); got != c.median {
			t.Errorf("%v.median() = %s, want %s", c.s, got, c.median)
		}
		if got := c.s.mean(); got != c.mean {
			t.Errorf("%v.mean() = %s, want %s", c.s, got, c.mean)
		}
	}
}
