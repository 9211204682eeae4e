package chat

import (
	"testing"
	"time"
)

// Expected strings are Python 3.11 datetime.strftime on Linux (glibc, C locale).
func TestStrftime(t *testing.T) {
	const format = "%a|%A|%b|%B|%c|%d|%e|%f|%H|%I|%j|%m|%M|%p|%S|%u|%w|%x|%X|%y|%Y|%%|%-d|%-m|%-H|%-I|%-j|%h|%Q"
	cases := []struct {
		t    time.Time
		want string
	}{
		{time.Date(2024, 1, 7, 0, 5, 9, 123456000, time.UTC),
			"Sun|Sunday|Jan|January|Sun Jan  7 00:05:09 2024|07| 7|123456|00|12|007|01|05|AM|09|7|0|01/07/24|00:05:09|24|2024|%|7|1|0|12|7|Jan|%Q"},
		{time.Date(2023, 12, 31, 23, 59, 59, 0, time.UTC),
			"Sun|Sunday|Dec|December|Sun Dec 31 23:59:59 2023|31|31|000000|23|11|365|12|59|PM|59|7|0|12/31/23|23:59:59|23|2023|%|31|12|23|11|365|Dec|%Q"},
	}
	for _, c := range cases {
		if got := strftime(format, c.t); got != c.want {
			t.Errorf("strftime(%v)\n got %q\nwant %q", c.t, got, c.want)
		}
	}
	tz := time.FixedZone("X", -(5*3600 + 30*60))
	if got := strftime("%z %Z %", time.Date(2024, 1, 1, 0, 0, 0, 0, tz)); got != "-0530 X %" {
		t.Errorf("zone: got %q", got)
	}
}
