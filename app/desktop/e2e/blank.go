package e2e

import (
	"fmt"
	"image"
	_ "image/png" // screenshots are PNG
	"os"
)

// A screenshot is blank when it is tiny, when one colour covers nearly all
// of it (a window whose web view never painted shows only its background),
// or when it has too few colours to hold any rendered text.
const (
	minSide          = 64
	maxDominantShare = 0.99
	minColours       = 16
)

// Blank says why the image at path shows nothing ("" when it shows
// something), or returns an error when it cannot be read as an image.
func Blank(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return blankReason(img), nil
}

func blankReason(img image.Image) string {
	b := img.Bounds()
	if b.Dx() < minSide || b.Dy() < minSide {
		return fmt.Sprintf("only %dx%d pixels", b.Dx(), b.Dy())
	}
	counts := map[[3]uint32]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			counts[[3]uint32{r >> 8, g >> 8, bl >> 8}]++
		}
	}
	top, topColour := 0, [3]uint32{}
	for c, n := range counts {
		if n > top {
			top, topColour = n, c
		}
	}
	total := b.Dx() * b.Dy()
	if share := float64(top) / float64(total); share > maxDominantShare {
		return fmt.Sprintf("%.1f%% of it is one colour (#%02x%02x%02x)", 100*share, topColour[0], topColour[1], topColour[2])
	}
	if len(counts) < minColours {
		return fmt.Sprintf("only %d colours: no rendered text", len(counts))
	}
	return ""
}
