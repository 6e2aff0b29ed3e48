package finder

import (
	"math"
	"sort"

	"miotool/internal/words"
)

// zThreshold and zScale are MIOpen's high-outlier filter: a sample whose
// modified z-score 0.6745*(x-median)/MAD exceeds 2.0 is dropped.
const (
	zThreshold = 2.0
	zScale     = 0.6745
)

// RobustMean is the mean of samples after dropping high outliers by
// modified z-score (only high ones: a slow sample is noise, a fast one is
// not). With MAD = 0 every sample is kept. It returns the mean and how many
// samples were dropped.
func RobustMean(samples []float64) (mean float64, dropped int) {
	if len(samples) == 0 {
		return math.NaN(), 0
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	med := words.Median(s)
	dev := make([]float64, len(s))
	for i, x := range s {
		dev[i] = math.Abs(x - med)
	}
	sort.Float64s(dev)
	mad := words.Median(dev)
	sum, n := 0.0, 0
	for _, x := range s {
		if mad > 0 && zScale*(x-med)/mad > zThreshold {
			dropped++
			continue
		}
		sum += x
		n++
	}
	return sum / float64(n), dropped
}
