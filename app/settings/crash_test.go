package settings

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashChildEnv makes the test binary, run as a child, save in a loop.
const crashChildEnv = "NIBBLE_SETTINGS_SAVE_LOOP"

// promptLen ties the system prompt's length to the save number, so that a
// file mixing two saves would be caught even if it parsed.
func promptLen(i int) int { return i * 7919 % 150000 }

// TestSaveAtomicUnderSIGKILL kills a process that saves in a loop at random
// moments; whatever it left must load cleanly as one complete save. (A
// process kill, not a power loss: that needs the fsyncs, which this cannot
// test.)
func TestSaveAtomicUnderSIGKILL(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		saveLoop(path)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	path := settingsPath(t)
	for round := range 8 {
		cmd := exec.Command(exe, "-test.run=^TestSaveAtomicUnderSIGKILL$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, fmt.Sprintf("NIBBLE_SETTINGS_SEED=%d", round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until it has saved once, then let it run into the middle of
		// a later save.
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "saving\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child: %q, %v", line, err)
		}
		time.Sleep(time.Duration(round*7%20) * time.Millisecond)
		cmd.Process.Kill() // SIGKILL on Unix
		cmd.Wait()

		s, err := Load(path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(s.LastModel, "/models/"))
		if err != nil || len(s.SystemPrompt) != promptLen(i) || s.Threads != i%MaxThreads {
			t.Fatalf("round %d: a mixed or foreign file: save %q, prompt of %d bytes, %d threads", round, s.LastModel, len(s.SystemPrompt), s.Threads)
		}
	}
}

func saveLoop(path string) {
	seed, _ := strconv.Atoi(os.Getenv("NIBBLE_SETTINGS_SEED"))
	s := Defaults()
	deadline := time.Now().Add(10 * time.Second) // in case the parent died
	for i := seed * 1000; time.Now().Before(deadline); i++ {
		s.LastModel = "/models/" + strconv.Itoa(i)
		s.SystemPrompt = strings.Repeat("x", promptLen(i))
		s.Threads = i % MaxThreads
		if err := Save(path, s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if i == seed*1000 {
			fmt.Println("saving")
		}
	}
}
