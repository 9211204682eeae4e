package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// windowState is what the X server says of the app's top-level windows
// (those titled title) on display: how many there are, and whether one is
// mapped and viewable, that is on screen.
type windowState struct {
	Windows  int      `json:"windows"`
	Viewable bool     `json:"viewable"`
	States   []string `json:"states"` // each window's "Map State"
}

var (
	treeLine = regexp.MustCompile(`^\s*(0x[0-9a-f]+) "([^"]*)"`)
	mapState = regexp.MustCompile(`Map State:\s*(\S+)`)
)

// appWindow asks xwininfo (x11-utils) about the windows titled title.
func appWindow(display, title string) (windowState, error) {
	var st windowState
	tree, err := exec.Command("xwininfo", "-display", display, "-root", "-tree").Output()
	if err != nil {
		return st, fmt.Errorf("xwininfo -root -tree on %s: %w", display, err)
	}
	for line := range strings.SplitSeq(string(tree), "\n") {
		m := treeLine.FindStringSubmatch(line)
		if m == nil || m[2] != title {
			continue
		}
		info, err := exec.Command("xwininfo", "-display", display, "-id", m[1]).Output()
		if err != nil {
			return st, fmt.Errorf("xwininfo -id %s: %w", m[1], err)
		}
		state := "unknown"
		if ms := mapState.FindSubmatch(info); ms != nil {
			state = string(ms[1])
		}
		st.Windows++
		st.States = append(st.States, state)
		st.Viewable = st.Viewable || state == "IsViewable"
	}
	return st, nil
}
