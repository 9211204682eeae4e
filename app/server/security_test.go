package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"nibble/engine/scheduler"
)

// A non-loopback address needs a token; loopback ones do not.
func TestCheckBind(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:11435", ":11435", "192.168.1.5:80", "[::]:1", "example.com:80"} {
		err := CheckBind(addr, "")
		if err == nil || !strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s without a token: %v", addr, err)
		}
		if err := CheckBind(addr, "s3cret-token"); err != nil {
			t.Errorf("%s with a token: %v", addr, err)
		}
		if _, err := New(nil, Config{Addr: addr}); err == nil {
			t.Errorf("New accepted %s without a token", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:11435", "localhost:0", "[::1]:8080", "127.0.0.2:1"} {
		if err := CheckBind(addr, ""); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if err := CheckBind("127.0.0.1:1", "a b"); err == nil {
		t.Error("a token with a space")
	}
	if _, err := New(nil, Config{Addr: "127.0.0.1:1", CORSOrigins: []string{"localhost:3000"}}); err == nil {
		t.Error("an origin without a scheme")
	}
}

// With a token, every request must carry it (preflights excepted).
func TestAuth(t *testing.T) {
	const token = "correct-horse-battery"
	_, ts := serve(t, loadScheduler(t, scheduler.Config{}), Config{Token: token})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", token}, {"Authorization", "Basic " + token}} {
		r := do(t, "GET", ts.URL+"/v1/models", "", h...)
		if _, typ, _, code := r.errorOf(t); r.status != 401 || code != "invalid_api_key" || typ != "invalid_request_error" || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%v: %d %v %s", h, r.status, r.header, r.body)
		}
	}
	// Unknown routes do not answer before the token either.
	if r := do(t, "GET", ts.URL+"/v1/nothing", ""); r.status != 401 {
		t.Errorf("unknown route without the token: %d", r.status)
	}
	if r := do(t, "GET", ts.URL+"/v1/models", "", "Authorization", "Bearer "+token); r.status != 200 {
		t.Fatalf("right token: %d %s", r.status, r.body)
	}
	if r := post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`, "Authorization", "bearer "+token); r.status != 200 {
		t.Fatalf("right token, lower-case scheme: %d %s", r.status, r.body)
	}
}

// CORS: only configured origins; preflights answered; other origins refused.
func TestCORS(t *testing.T) {
	sched := loadScheduler(t, scheduler.Config{})
	_, ts := serve(t, sched, Config{CORSOrigins: []string{"http://localhost:3000", "https://app.example/"}})

	pre := do(t, "OPTIONS", ts.URL+"/v1/chat/completions", "", "Origin", "http://localhost:3000",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, x-stainless-os")
	h := pre.header
	if pre.status != 204 || h.Get("Access-Control-Allow-Origin") != "http://localhost:3000" || h.Get("Access-Control-Allow-Methods") != "POST, OPTIONS" ||
		h.Get("Access-Control-Allow-Headers") != "authorization, content-type, x-stainless-os" || h.Get("Access-Control-Max-Age") == "" || h.Get("Vary") != "Origin" {
		t.Fatalf("preflight: %d %v", pre.status, h)
	}
	r := post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`, "Origin", "https://app.example")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("allowed origin: %d %v", r.status, r.header)
	}
	// Another origin: refused before anything runs, preflight or not (a
	// text/plain POST needs no preflight).
	for _, method := range []string{"OPTIONS", "POST"} {
		r := do(t, method, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`, "Origin", "http://evil.example",
			"Access-Control-Request-Method", "POST", "Content-Type", "text/plain")
		if msg, _, _, code := r.errorOf(t); r.status != 403 || code != "origin_not_allowed" || r.header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(msg, "--cors") {
			t.Errorf("%s from another origin: %d %v %s", method, r.status, r.header, r.body)
		}
	}
	// No origin (curl, SDKs): no CORS headers.
	if r := do(t, "GET", ts.URL+"/v1/models", ""); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("no origin: %d %v", r.status, r.header)
	}

	// By default no origin is allowed.
	_, plain := serve(t, sched, Config{})
	if r := do(t, "GET", plain.URL+"/v1/models", "", "Origin", "http://localhost:3000"); r.status != 403 {
		t.Fatalf("default: %d %v", r.status, r.header)
	}
	// "*" must be asked for.
	_, star := serve(t, sched, Config{CORSOrigins: []string{"*"}})
	if r := do(t, "GET", star.URL+"/v1/models", "", "Origin", "http://anything.example"); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "http://anything.example" {
		t.Fatalf("*: %d %v", r.status, r.header)
	}
}

// Bound to loopback, only loopback Host headers are answered (DNS
// rebinding); bound elsewhere (with a token), the Host is not checked.
func TestHostCheck(t *testing.T) {
	sched := loadScheduler(t, scheduler.Config{})
	_, ts := serve(t, sched, Config{})
	port := ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "app.localhost:" + port, "127.1.2.3"} {
		if r := do(t, "GET", ts.URL+"/v1/models", "", "Host", host); r.status != 200 {
			t.Errorf("Host %s: %d %s", host, r.status, r.body)
		}
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example", "192.168.1.10:" + port, "0.0.0.0:" + port} {
		r := do(t, "GET", ts.URL+"/v1/models", "", "Host", host)
		if msg, _, _, code := r.errorOf(t); r.status != 403 || code != "host_not_allowed" || !strings.Contains(msg, "DNS rebinding") {
			t.Errorf("Host %s: %d %s", host, r.status, r.body)
		}
	}

	open, err := New(sched, Config{Addr: "0.0.0.0:11435", Token: "tok-12345"})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/models", nil)
	req.Host = "my-mac.lan:11435"
	req.Header.Set("Authorization", "Bearer tok-12345")
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("bound to all interfaces: %d %s", rec.Code, rec.Body)
	}
}

// The stats endpoint answers loopback peers only.
func TestStatsLoopbackOnly(t *testing.T) {
	srv, ts := newServer(t)
	decodeCompletion(t, post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":2,"ignore_eos":true}`))
	r := do(t, "GET", ts.URL+"/v1/nibble/stats", "")
	st := r.json(t)
	if r.status != 200 || st["requests"] != 1.0 || st["completed"] != 1.0 || st["completion_tokens"] != 2.0 || st["active"] != 0.0 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	req := httptest.NewRequest("GET", "/v1/nibble/stats", nil)
	req.Host = "localhost"
	req.RemoteAddr = "192.168.1.20:5555"
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("remote peer: %d %s", rec.Code, rec.Body)
	}
}
