package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
)

// header is X11's XWDFileHeader: 25 big-endian 32-bit fields, then the
// window name up to HeaderSize.
type header struct {
	HeaderSize, FileVersion, PixmapFormat, PixmapDepth, PixmapWidth, PixmapHeight uint32
	XOffset, ByteOrder, BitmapUnit, BitmapBitOrder, BitmapPad, BitsPerPixel       uint32
	BytesPerLine, VisualClass, RedMask, GreenMask, BlueMask, BitsPerRGB           uint32
	ColormapEntries, NColors, WindowWidth, WindowHeight, WindowX, WindowY         uint32
	WindowBorderWidth                                                             uint32
}

const (
	zPixmap    = 2
	lsbFirst   = 0
	trueColor  = 4
	directColr = 5
	maxPixels  = 1 << 26
)

// decode reads a TrueColor ZPixmap XWD image with 24 or 32 bits per pixel,
// which is what xwd and Xvfb's -fbdir write for a 24-bit screen.
func decode(r io.Reader) (*image.RGBA, error) {
	var h header
	if err := binary.Read(r, binary.BigEndian, &h); err != nil {
		return nil, fmt.Errorf("xwd header: %w", err)
	}
	switch {
	case h.FileVersion != 7:
		return nil, fmt.Errorf("xwd: file version %d, want 7", h.FileVersion)
	case h.PixmapFormat != zPixmap:
		return nil, fmt.Errorf("xwd: pixmap format %d, want ZPixmap (2)", h.PixmapFormat)
	case h.VisualClass != trueColor && h.VisualClass != directColr:
		return nil, fmt.Errorf("xwd: visual class %d, want TrueColor or DirectColor", h.VisualClass)
	case h.BitsPerPixel != 24 && h.BitsPerPixel != 32:
		return nil, fmt.Errorf("xwd: %d bits per pixel, want 24 or 32", h.BitsPerPixel)
	case h.HeaderSize < 100 || h.HeaderSize > 1<<16:
		return nil, fmt.Errorf("xwd: header size %d", h.HeaderSize)
	case h.PixmapWidth == 0 || h.PixmapHeight == 0 || uint64(h.PixmapWidth)*uint64(h.PixmapHeight) > maxPixels:
		return nil, fmt.Errorf("xwd: %dx%d pixels", h.PixmapWidth, h.PixmapHeight)
	case uint64(h.BytesPerLine) < uint64(h.PixmapWidth)*uint64(h.BitsPerPixel/8):
		return nil, fmt.Errorf("xwd: %d bytes per line for %d pixels", h.BytesPerLine, h.PixmapWidth)
	}
	// The window name, then the colormap (unused for TrueColor).
	if _, err := io.CopyN(io.Discard, r, int64(h.HeaderSize-100)+int64(h.NColors)*12); err != nil {
		return nil, fmt.Errorf("xwd colormap: %w", err)
	}
	w, ht := int(h.PixmapWidth), int(h.PixmapHeight)
	img := image.NewRGBA(image.Rect(0, 0, w, ht))
	line := make([]byte, h.BytesPerLine)
	bpp := int(h.BitsPerPixel / 8)
	rs, gs, bs := shift(h.RedMask), shift(h.GreenMask), shift(h.BlueMask)
	for y := range ht {
		if _, err := io.ReadFull(r, line); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("xwd pixels, row %d: %w", y, err)
		}
		for x := range w {
			p := line[x*bpp : x*bpp+bpp]
			var v uint32
			if h.ByteOrder == lsbFirst {
				for i := bpp - 1; i >= 0; i-- {
					v = v<<8 | uint32(p[i])
				}
			} else {
				for i := range bpp {
					v = v<<8 | uint32(p[i])
				}
			}
			img.SetRGBA(x, y, color.RGBA{
				R: uint8((v & h.RedMask) >> rs), G: uint8((v & h.GreenMask) >> gs), B: uint8((v & h.BlueMask) >> bs), A: 0xff,
			})
		}
	}
	return img, nil
}

// shift is the position of mask's lowest set bit (masks are 8 bits wide
// on 24-bit screens).
func shift(mask uint32) uint32 {
	var s uint32
	for mask != 0 && mask&1 == 0 {
		mask >>= 1
		s++
	}
	return s
}

// trim is the smallest rectangle holding every pixel that is not pure
// black, Xvfb's root background with -br; the whole image if all are.
func trim(img *image.RGBA) image.Rectangle {
	b := img.Bounds()
	box := image.Rectangle{Min: b.Max, Max: b.Min}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if c := img.RGBAAt(x, y); c.R|c.G|c.B != 0 {
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	if box.Empty() {
		return b
	}
	return box
}
