//go:build unix

package cpu

import "syscall"

func mapAnon(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func unmapAnon(m []byte) { _ = syscall.Munmap(m) }
