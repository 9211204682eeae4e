package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"strings"
	"testing"
)

// xwdFile writes a 32-bit TrueColor ZPixmap dump of px (rows of 0xRRGGBB)
// the way Xvfb does on a little-endian machine.
func xwdFile(t *testing.T, px [][]uint32, padTo int) []byte {
	t.Helper()
	name := "Xvfb main window\x00"
	h := header{
		HeaderSize: uint32(100 + len(name)), FileVersion: 7, PixmapFormat: zPixmap, PixmapDepth: 24,
		PixmapWidth: uint32(len(px[0])), PixmapHeight: uint32(len(px)), ByteOrder: lsbFirst,
		BitmapUnit: 32, BitmapPad: 32, BitsPerPixel: 32, BytesPerLine: uint32(padTo),
		VisualClass: trueColor, RedMask: 0xff0000, GreenMask: 0xff00, BlueMask: 0xff, BitsPerRGB: 8,
		ColormapEntries: 256, NColors: 2,
	}
	var b bytes.Buffer
	if err := binary.Write(&b, binary.BigEndian, h); err != nil {
		t.Fatal(err)
	}
	b.WriteString(name)
	b.Write(make([]byte, 2*12))
	for _, row := range px {
		line := make([]byte, padTo)
		for x, v := range row {
			binary.LittleEndian.PutUint32(line[4*x:], v)
		}
		b.Write(line)
	}
	return b.Bytes()
}

func TestDecodeAndTrim(t *testing.T) {
	px := [][]uint32{
		{0, 0, 0, 0},
		{0, 0x1c1c1e, 0xff8000, 0},
		{0, 0x0000ff, 0x00ff00, 0},
	}
	img, err := decode(bytes.NewReader(xwdFile(t, px, 20)))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds() != image.Rect(0, 0, 4, 3) {
		t.Fatalf("bounds %v", img.Bounds())
	}
	if got := img.RGBAAt(2, 1); got != (color.RGBA{0xff, 0x80, 0x00, 0xff}) {
		t.Fatalf("pixel (2,1) = %v", got)
	}
	if got := img.RGBAAt(1, 2); got != (color.RGBA{0, 0, 0xff, 0xff}) {
		t.Fatalf("pixel (1,2) = %v", got)
	}
	if got := trim(img); got != image.Rect(1, 1, 3, 3) {
		t.Fatalf("trim %v, want (1,1)-(3,3)", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := xwdFile(t, [][]uint32{{1, 2}}, 8)
	for name, mutate := range map[string]func([]byte) []byte{
		"truncated pixels": func(b []byte) []byte { return b[:len(b)-3] },
		"short header":     func(b []byte) []byte { return b[:40] },
		"version":          func(b []byte) []byte { binary.BigEndian.PutUint32(b[4:], 6); return b },
		"bits per pixel":   func(b []byte) []byte { binary.BigEndian.PutUint32(b[44:], 16); return b },
		"line too short":   func(b []byte) []byte { binary.BigEndian.PutUint32(b[48:], 4); return b },
		"huge":             func(b []byte) []byte { binary.BigEndian.PutUint32(b[16:], 1<<20); return b },
	} {
		if _, err := decode(bytes.NewReader(mutate(bytes.Clone(good)))); err == nil || !strings.Contains(err.Error(), "xwd") {
			t.Errorf("%s: err %v, want an xwd error", name, err)
		}
	}
}
