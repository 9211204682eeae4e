package server

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"nibble/engine/scheduler"
)

// stallingRequest opens a raw connection, sends a request's headers (with
// a body announced by Content-Length) and then nothing more.
func stallingRequest(t *testing.T, addr, headers string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(headers)); err != nil {
		t.Fatal(err)
	}
	return c
}

// readStatus reads the reply's status within wait, or reports that the
// connection was closed without one ("" and the error).
func readStatus(c net.Conn, wait time.Duration) (int, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

func TestStalledRequestsEndWithinTheirDeadlines(t *testing.T) {
	sched := scheduler.New(scheduler.Config{}) // no model: the routes answer at once
	t.Cleanup(func() { sched.Close() })
	l, err := Listen(sched, Config{Addr: "127.0.0.1:0", Token: "secret",
		HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(t.Context())
	post := func(auth string) string {
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			auth + "Content-Length: 100\r\n\r\n{\"model\":"
	}

	t.Run("a 401 comes without waiting for the body", func(t *testing.T) {
		c := stallingRequest(t, l.Addr(), post("Authorization: Bearer wrong\r\n"))
		start := time.Now()
		code, err := readStatus(c, 5*time.Second)
		if err != nil || code != http.StatusUnauthorized {
			t.Fatalf("status %d, %v; want 401", code, err)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("the 401 took %v: it waited for the body", d)
		}
	})
	t.Run("a withheld body times out", func(t *testing.T) {
		c := stallingRequest(t, l.Addr(), post("Authorization: Bearer secret\r\n"))
		start := time.Now()
		code, err := readStatus(c, 5*time.Second)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the connection was held %v (status %d, %v)", d, code, err)
		}
	})
	t.Run("withheld headers time out", func(t *testing.T) {
		c := stallingRequest(t, l.Addr(), "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		start := time.Now()
		code, err := readStatus(c, 5*time.Second)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the connection was held %v (status %d, %v)", d, code, err)
		}
	})
	t.Run("an idle connection is closed", func(t *testing.T) {
		c := stallingRequest(t, l.Addr(), "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n\r\n")
		r := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		start := time.Now()
		_, err = r.ReadByte()
		if d := time.Since(start); err == nil || d > 3*time.Second || strings.Contains(err.Error(), "timeout") {
			t.Fatalf("the idle connection was held %v (%v)", d, err)
		}
	})
}
