package pdf

import "testing"

func TestPageList(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "page 3"},
		{[]int{2, 5, 6, 7, 9}, "pages 2, 5–7, 9"},
	} {
		if got := pageList(c.in); got != c.want {
			t.Errorf("pageList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
