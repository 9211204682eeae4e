// Package numeric has the small numeric measures that the engine, the KV
// probe and the backends' tests share, so that each figure means the same
// everywhere.
package numeric

import "math"

// Cosine is the cosine similarity of a and b (a's length; b at least as
// long), summed in float64 whatever the element types, so that a float32
// result can be compared with a float64 reference.
func Cosine[A, B ~float32 | ~float64](a []A, b []B) float64 {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
	}
	return ab / math.Sqrt(aa*bb)
}
