//go:build !amd64

package cpu

func swiGLU(dst, gate, up []float32) { swiGLUGo(dst, gate, up) }
