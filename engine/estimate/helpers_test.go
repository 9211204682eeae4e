package estimate

import (
	"nibble/internal/testdata"
	"testing"
)

func repoRoot(t testing.TB) string { return testdata.RepoRoot(t) }

func testdataDir(t testing.TB) string { return testdata.Dir(t) }
