package eval

import (
	"fmt"

	"nibble/engine/kv"
	"nibble/engine/kvprobe"
)

// Threshold is one bar a KV cache type must clear against f16 on the
// trained model: the acceptance bar of `kvcheck --batch 1` over a 2K
// needle document.
type Threshold struct {
	Type   kv.Type `json:"-"`
	Metric string  `json:"metric"` // "top1" or "forced"
	// Bound is, for "top1", the least Top1Agreement (a fraction); for
	// "forced", the most teacher-forced greedy misses allowed.
	Bound float64 `json:"bound"`
}

// TrainedModelThresholds are q4 top-1 ≥ 98% with at most one teacher-forced
// greedy miss (23/24), and q8 top-1 ≥ 99.5%.
var TrainedModelThresholds = []Threshold{
	{Type: kv.Q4, Metric: "top1", Bound: 0.98},
	{Type: kv.Q4, Metric: "forced", Bound: 1},
	{Type: kv.Q8, Metric: "top1", Bound: 0.995},
}

// ThresholdCheck is a threshold applied to a measurement.
type ThresholdCheck struct {
	Threshold
	KV    string `json:"kv"` // Type as the settings spell it
	Value string `json:"value"`
	Want  string `json:"want"`
	Pass  bool   `json:"pass"`
}

// CheckThresholds applies ths to the quality figures of each type; a type
// with no figures fails with a value of "not measured".
func CheckThresholds(types map[kv.Type]*kvprobe.Quality, ths []Threshold) []ThresholdCheck {
	var out []ThresholdCheck
	for _, th := range ths {
		c := ThresholdCheck{Threshold: th, KV: th.Type.String(), Value: "not measured"}
		q := types[th.Type]
		switch th.Metric {
		case "top1":
			c.Want = fmt.Sprintf("≥ %.1f%%", 100*th.Bound)
			if q != nil {
				c.Value = fmt.Sprintf("%.2f%%", 100*q.Top1Agreement)
				c.Pass = q.Top1Agreement >= th.Bound
			}
		case "forced":
			if q != nil {
				c.Want = fmt.Sprintf("≥ %d/%d", q.GreedyTotal-int(th.Bound), q.GreedyTotal)
				c.Value = fmt.Sprintf("%d/%d", q.GreedyForced, q.GreedyTotal)
				c.Pass = q.GreedyForced >= q.GreedyTotal-int(th.Bound)
			} else {
				c.Want = fmt.Sprintf("at most %d miss", int(th.Bound))
			}
		default:
			c.Value = "unknown metric " + th.Metric
		}
		out = append(out, c)
	}
	return out
}
