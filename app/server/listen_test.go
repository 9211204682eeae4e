package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"nibble/engine/scheduler"
)

func TestListenServesAndShutsDown(t *testing.T) {
	sched := scheduler.New(scheduler.Config{}) // no model: /v1/models is an empty list
	t.Cleanup(func() { sched.Close() })
	l, err := Listen(sched, Config{Addr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.URL(), "http://127.0.0.1:") || strings.HasSuffix(l.Addr(), ":0") {
		t.Fatalf("URL %s, Addr %s: want the listener's own port", l.URL(), l.Addr())
	}
	r := do(t, "GET", l.URL()+"/models", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("GET /v1/models: %d %s", r.status, r.body)
	}

	_, err = Listen(sched, Config{Addr: l.Addr()}, nil)
	if err == nil || !strings.Contains(err.Error(), "the port is in use") {
		t.Fatalf("a second Listen on %s: %v, want the port in use", l.Addr(), err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Shutdown")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err after Shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", l.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Shutdown", l.Addr())
	}
}

func TestListenRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Addr: "0.0.0.0:0"}, "without a token"},
		{Config{Addr: "127.0.0.1:0", CORSOrigins: []string{"not an origin"}}, "CORS origin"},
		{Config{Addr: "127.0.0.1:99999"}, "cannot listen on 127.0.0.1:99999"},
	} {
		l, err := Listen(nil, c.cfg, nil)
		if err == nil {
			l.Shutdown(context.Background())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error that says %q", c.cfg, err, c.want)
		}
	}
}
