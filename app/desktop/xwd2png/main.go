// Command xwd2png converts an XWD screen dump (xwd, or the frame buffer
// file of Xvfb -fbdir) to PNG, for the app's smoke screenshots without
// ImageMagick.
//
//	go run ./app/desktop/xwd2png [-trim] IN.xwd OUT.png
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
)

func main() {
	trimBlack := flag.Bool("trim", false, "crop away the pure-black border (Xvfb -br's background)")
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: xwd2png [-trim] IN.xwd OUT.png") }
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := convert(flag.Arg(0), flag.Arg(1), *trimBlack); err != nil {
		fmt.Fprintln(os.Stderr, "xwd2png:", err)
		os.Exit(1)
	}
}

func convert(in, out string, trimBlack bool) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := decode(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if trimBlack {
		img = img.SubImage(trim(img)).(*image.RGBA)
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := png.Encode(o, img); err != nil {
		o.Close()
		return fmt.Errorf("%s: %w", out, err)
	}
	return o.Close()
}
