package mtl

import "fmt"

// View is one wrapped MTLBuffer over bytes [Off, Off+Len) of a region.
type View struct{ Off, Len int }

// splitViews splits a region of n bytes (starting on a page) into views of
// at most max bytes that start on page boundaries and overlap by at least
// overlap bytes, as llama.cpp's Metal backend does for a model larger than
// the device's maxBufferLength: then any span of up to overlap bytes lies
// wholly inside the view viewAt picks for its start. Every view but the
// last is max rounded down to a page; the last ends at n (which the caller
// rounds up to a page: Metal wraps whole pages).
func splitViews(n, max, page, overlap int) ([]View, error) {
	switch {
	case n <= 0 || page <= 0 || max < page:
		return nil, fmt.Errorf("views of %d bytes, at most %d each, %d-byte pages", n, max, page)
	case n <= max:
		return []View{{0, n}}, nil
	}
	size := max / page * page
	step := (size - overlap) / page * page
	if overlap < 0 || step <= 0 {
		return nil, fmt.Errorf("views of %d bytes cannot overlap by %d", size, overlap)
	}
	var vs []View
	for off := 0; ; off += step {
		if off+size >= n {
			vs = append(vs, View{off, n - off})
			return vs, nil
		}
		vs = append(vs, View{off, size})
	}
}

// viewAt is the view that serves a binding at byte off of the region: the
// last one starting at or before off. It holds at least the views' overlap
// bytes from off (or all that is left of the region).
func viewAt(vs []View, off int) int {
	lo, hi := 0, len(vs)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if vs[mid].Off <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// pageSpan checks that addr starts a page and returns n rounded up to
// whole pages (newBufferWithBytesNoCopy:length: wraps whole pages; the tail
// of the last page is mapped whenever its first byte is).
func pageSpan(addr uintptr, n, page int) (int, error) {
	if r := int(addr % uintptr(page)); r != 0 {
		return 0, fmt.Errorf("%w: Metal's newBufferWithBytesNoCopy wraps only page-aligned memory; %d bytes at %#x start %d bytes into a %d-byte page (a file mapping is aligned: map the model, or copy the bytes into a NewBuffer)", ErrAlignment, n, addr, r, page)
	}
	return (n + page - 1) / page * page, nil
}
