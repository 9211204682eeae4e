//go:build unix

package history

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The child process of TestKillDuringWrites: it writes to the database named
// in writerEnv until killed, printing a line after each commit returns.
const writerEnv = "NIBBLE_HISTORY_WRITER_DB"

// body is the first n bytes of a stream determined by key, so the parent can
// recompute what a message must contain, and a longer streaming update
// extends a shorter one. Fences make it look like a real reply.
func body(key string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s line %d: ```go\nfmt.Println(%d) // 100%% _done_\n```\n", key, i, i*i)
	}
	return b.String()[:n]
}

// sizes mixes short chat turns with long replies, so the WAL grows past
// its checkpoint threshold and kills also land inside checkpoints.
var sizes = []int{1, 40, 300, 3000, 20000, 90000}

func TestHelperWriter(t *testing.T) {
	path := os.Getenv(writerEnv)
	if path == "" {
		t.Skip("child process of TestKillDuringWrites")
	}
	fail := func(err error) {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
	s, err := Open(path)
	if err != nil {
		fail(err)
	}
	seed, _ := strconv.ParseUint(os.Getenv(writerEnv+"_SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 0))
	// Each line is one write(2) of under PIPE_BUF bytes, so the parent reads
	// it whole or not at all.
	var conv int64
	deadline := time.Now().Add(20 * time.Second) // in case the parent is gone
	for n := 0; time.Now().Before(deadline); n++ {
		if n%6 == 0 {
			c, err := s.NewConversation(fmt.Sprintf("seed %d conv %d", seed, n), "test-model")
			if err != nil {
				fail(err)
			}
			conv = c.ID
			fmt.Printf("conv %d\n", conv)
		}
		key := fmt.Sprintf("s%d-n%d", seed, n)
		size := sizes[rng.IntN(len(sizes))]
		if rng.IntN(3) > 0 {
			role := []Role{RoleUser, RoleAssistant}[n%2]
			m, err := s.AppendMessage(conv, Message{Role: role, Content: body(key, size)})
			if err != nil {
				fail(err)
			}
			fmt.Printf("msg %d %d %s %s %d\n", m.ID, conv, role, key, size)
			continue
		}
		// A streaming reply: appended empty, grown, then finalised.
		m, err := s.AppendMessage(conv, Message{Role: RoleAssistant})
		if err != nil {
			fail(err)
		}
		fmt.Printf("msg %d %d assistant %s 0\n", m.ID, conv, key)
		for step := 1; step <= 3; step++ {
			if err := s.UpdateMessage(m.ID, body(key, size*step/3), nil); err != nil {
				fail(err)
			}
			fmt.Printf("grow %d %d\n", m.ID, size*step/3)
		}
		st := &Stats{Tokens: size / 4, TokensPerSec: 25.5, TTFT: time.Duration(size) * time.Microsecond, FinishReason: "stop"}
		if err := s.UpdateMessage(m.ID, body(key, size), st); err != nil {
			fail(err)
		}
		fmt.Printf("final %d %d\n", m.ID, size)
	}
	s.Close()
}

// reported is what the child said it committed to one message.
type reported struct {
	conv  int64
	role  Role
	key   string
	size  int  // content length at the last reported commit
	final bool // stats were committed
}

// TestKillDuringWrites: "a kill -9 at any moment loses at most the message
// being written and never corrupts the database". A child appends and
// streams messages in a loop; it is SIGKILLed at a random moment, then the
// database must pass integrity_check and hold every commit the child
// reported. Rounds share one file, so each also recovers the previous crash.
func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "history.db")
	msgs := map[int64]*reported{}
	convs := map[int64]bool{}
	const rounds = 10
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	totalCommits, prevExtra := 0, 0
	start := time.Now()
	for round := range rounds {
		delay := time.Duration(rng.IntN(200)) * time.Millisecond
		lines, stderr := runAndKill(t, path, round, delay)
		commits := 0
		for _, line := range lines {
			commits++
			f := strings.Fields(line)
			num := func(i int) int64 {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					t.Fatalf("round %d: bad line %q from child", round, line)
				}
				return v
			}
			switch f[0] {
			case "conv":
				convs[num(1)] = true
			case "msg":
				msgs[num(1)] = &reported{conv: num(2), role: Role(f[3]), key: f[4], size: int(num(5))}
			case "grow":
				msgs[num(1)].size = int(num(2))
			case "final":
				msgs[num(1)].size, msgs[num(1)].final = int(num(2)), true
			default:
				t.Fatalf("round %d: child failed: %s\nstderr: %s", round, line, stderr)
			}
		}
		totalCommits += commits
		var walBytes int64
		if fi, err := os.Stat(path + "-wal"); err == nil {
			walBytes = fi.Size()
		}
		extra := verifyAfterKill(t, path, msgs, convs)
		t.Logf("round %2d: SIGKILL after %3dms, %3d commits reported, WAL left %7d bytes: integrity ok, all reported present, %d unreported row(s)",
			round, delay.Milliseconds(), commits, walBytes, extra-prevExtra)
		// At most one write was in flight when the child died.
		if extra-prevExtra > 1 {
			t.Fatalf("round %d: %d messages or conversations that the child never reported", round, extra-prevExtra)
		}
		prevExtra = extra
	}
	t.Logf("%d rounds, %d commits reported, %d messages checked, in %v", rounds, totalCommits, len(msgs), time.Since(start).Round(time.Millisecond))
}

// runAndKill starts the writer, lets it commit at least once, waits delay
// and kills it with SIGKILL. It returns the lines the child printed.
func runAndKill(t *testing.T, path string, round int, delay time.Duration) ([]string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), writerEnv+"="+path, fmt.Sprintf("%s_SEED=%d", writerEnv, round))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		once := sync.OnceFunc(func() { close(first) })
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			once()
		}
		once()
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-done
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("round %d: child did not die by SIGKILL (%v); last output %q; stderr %s", round, err, lines[max(0, len(lines)-3):], stderr.String())
	}
	return lines, stderr.String()
}

// verifyAfterKill checks the file and every reported commit, and returns
// how many rows exist that the child did not report.
func verifyAfterKill(t *testing.T, path string, msgs map[int64]*reported, convs map[int64]bool) int {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	rows, err := s.db.Query(`PRAGMA integrity_check`)
	if err != nil {
		t.Fatal(err)
	}
	var res []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	rows.Close()
	if len(res) != 1 || res[0] != "ok" {
		t.Fatalf("integrity_check: %q", res)
	}
	ftsIntegrity(t, s)

	extra := 0
	seen := map[int64]bool{}
	for off := 0; ; off += MaxLimit {
		page := must(s.List(MaxLimit, off))
		for _, sum := range page {
			if !convs[sum.ID] {
				extra++
			}
			c := must(s.Get(sum.ID))
			for _, m := range c.Messages {
				r, ok := msgs[m.ID]
				if !ok {
					extra++
					continue
				}
				seen[m.ID] = true
				if r.conv != c.ID || r.role != m.Role {
					t.Fatalf("message %d: conversation %d role %s, reported %d %s", m.ID, c.ID, m.Role, r.conv, r.role)
				}
				// A later, unreported update may have landed too: the content
				// is the reported one or a longer prefix of the same stream.
				if len(m.Content) < r.size || m.Content != body(r.key, len(m.Content)) {
					t.Fatalf("message %d: content of %d bytes is not the reported %d bytes of %s", m.ID, len(m.Content), r.size, r.key)
				}
				if r.final && (m.Stats == nil || m.Stats.Tokens != r.size/4 || m.Stats.FinishReason != "stop" || len(m.Content) != r.size) {
					t.Fatalf("message %d: finalised reply lost its stats or content: %+v", m.ID, m.Stats)
				}
			}
		}
		if len(page) < MaxLimit {
			break
		}
	}
	for id, r := range msgs {
		if !seen[id] {
			t.Fatalf("message %d (%s, reported committed) is missing", id, r.key)
		}
	}
	for id := range convs {
		if _, err := s.Get(id); err != nil {
			t.Fatalf("conversation %d (reported committed): %v", id, err)
		}
	}
	return extra
}
