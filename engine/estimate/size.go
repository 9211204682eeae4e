package estimate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a byte size: a number with an optional unit B, K, M, G or
// T, written K/KB/KiB etc. All units are binary (1G = 1GB = 1GiB = 2^30):
// RAM is sold in binary gigabytes ("64GB" Macs have 64 GiB), and
// Open-TQ-Metal's figures count that way.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (e.g. 64GiB, 512MiB, 64G)", s)
	}
	shift := map[string]uint{"": 0, "B": 0,
		"K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20,
		"G": 30, "GB": 30, "GIB": 30, "T": 40, "TB": 40, "TIB": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, K, M, G or T, optionally with B or iB)", s, t[i:])
	}
	b := v * float64(uint64(1)<<sh)
	if b >= math.MaxInt64 || math.IsNaN(b) {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(b)), nil
}

// GiB formats bytes as GiB with two decimals.
func GiB(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

// Human formats bytes as GiB, or MiB below 1 GiB.
func Human(n int64) string {
	if n < 1<<30 && n > -(1<<30) {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return GiB(n)
}
