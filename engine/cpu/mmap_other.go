//go:build !unix

package cpu

import "errors"

func mapAnon(int) ([]byte, error) { return nil, errors.New("no anonymous mappings on this OS") }

func unmapAnon([]byte) {}
