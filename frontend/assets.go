//go:build cgo

// Package frontend holds the app's web UI (Svelte; see package.json). Its
// build output, dist/, is embedded into the app binary: run `make app`, or
// `npm ci && npm run build` here, before building with cgo.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Assets is the built UI, rooted at index.html.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path; fs.Sub fails only on invalid ones
	}
	return sub
}
