package chat

import (
	"strconv"
	"strings"
	"time"
)

// strftime implements the subset of Python's time.strftime (C locale, glibc) that chat templates
// use for dates: %a %A %b %B %c %d %e %f %H %I %j %m %M %p %S %u %w %x %X %y %Y %z %Z %%, with
// glibc's "-" flag (no padding, e.g. "%-d"). Unknown directives are copied through, as glibc does.
func strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		noPad := false
		if format[i] == '-' && i+1 < len(format) {
			noPad = true
			i++
		}
		num := func(v, width int) {
			s := strconv.Itoa(v)
			if !noPad {
				for n := len(s); n < width; n++ {
					b.WriteByte('0')
				}
			}
			b.WriteString(s)
		}
		switch d := format[i]; d {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'c':
			b.WriteString(strftime("%a %b %e %H:%M:%S %Y", t))
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if !noPad && t.Day() < 10 {
				b.WriteByte(' ') // glibc pads %e with a space
			}
			b.WriteString(strconv.Itoa(t.Day()))
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'S':
			num(t.Second(), 2)
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'x':
			b.WriteString(strftime("%m/%d/%y", t))
		case 'X':
			b.WriteString(strftime("%H:%M:%S", t))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 0)
		case 'z':
			_, off := t.Zone()
			sign := byte('+')
			if off < 0 {
				sign, off = '-', -off
			}
			b.WriteByte(sign)
			noPad = false
			num(off/3600, 2)
			num(off%3600/60, 2)
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if noPad {
				b.WriteByte('-')
			}
			b.WriteByte(d)
		}
	}
	return b.String()
}
