package e2e

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBlank(t *testing.T) {
	dark := color.RGBA{0x1c, 0x1c, 0x1e, 0xff}
	fill := func(w, h int, c color.RGBA) *image.RGBA {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.SetRGBA(x, y, c)
			}
		}
		return img
	}
	// Something like text: a block of many shades on the background.
	text := fill(420, 640, dark)
	for y := 20; y < 120; y++ {
		for x := 20; x < 400; x++ {
			v := uint8((x*7 + y*13) % 256)
			text.SetRGBA(x, y, color.RGBA{v, v, 255 - v, 0xff})
		}
	}
	// A few specks of another colour are still a blank window.
	specks := fill(420, 640, dark)
	for i := range 100 {
		specks.SetRGBA(i, i, color.RGBA{0xff, 0xff, 0xff, 0xff})
	}
	// Two flat halves: not one colour, but no text either.
	halves := fill(420, 640, dark)
	for y := 320; y < 640; y++ {
		for x := range 420 {
			halves.SetRGBA(x, y, color.RGBA{0xf5, 0xf5, 0xf7, 0xff})
		}
	}
	for _, tc := range []struct {
		name string
		img  image.Image
		want string // substring of the reason; "" for not blank
	}{
		{"window with text", text, ""},
		{"background only", fill(420, 640, dark), "one colour"},
		{"specks", specks, "one colour"},
		{"flat halves", halves, "colours"},
		{"tiny", fill(10, 10, dark), "pixels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "shot.png")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, tc.img); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got, err := Blank(path)
			if err != nil {
				t.Fatal(err)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Blank = %q, want a reason containing %q", got, tc.want)
			}
		})
	}
	if _, err := Blank(filepath.Join(t.TempDir(), "missing.png")); err == nil {
		t.Fatal("a missing file is not an error")
	}
	notPNG := filepath.Join(t.TempDir(), "x.png")
	os.WriteFile(notPNG, []byte("not an image"), 0o644)
	if _, err := Blank(notPNG); err == nil {
		t.Fatal("a file that is not an image is not an error")
	}
}
