package service

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func setServer(t *testing.T, s *Service, enabled bool, addr, token string) ServerStatus {
	t.Helper()
	c := s.Settings()
	c.Server.Enabled, c.Server.Address, c.Server.Token = enabled, addr, token
	if _, err := s.UpdateSettings(c); err != nil {
		t.Fatal(err)
	}
	return s.ServerStatus()
}

func httpDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestServerToggle(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if st := s.ServerStatus(); st.Enabled || st.Running {
		t.Fatalf("by default: %+v, want off", st)
	}
	addr := freeAddr(t)
	st := setServer(t, s, true, addr, "s3cret")
	if !st.Running || st.URL != "http://"+addr+"/v1" || st.Error != "" {
		t.Fatalf("turned on: %+v", st)
	}
	if ev, ok := rec.last(EventServer); !ok || !ev.(ServerStatus).Running {
		t.Fatalf("no server:status event saying it runs: %v", ev)
	}

	if code, body := httpDo(t, "GET", st.URL+"/models", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d %s", code, body)
	}
	code, body := httpDo(t, "GET", st.URL+"/models", "s3cret", "")
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &models); code != 200 || err != nil || len(models.Data) != 1 {
		t.Fatalf("GET /v1/models: %d %s (%v)", code, body, err)
	}
	code, body = httpDo(t, "POST", st.URL+"/chat/completions", "s3cret",
		`{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0}`)
	var chat struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &chat); code != 200 || err != nil || len(chat.Choices) != 1 || chat.Usage.CompletionTokens == 0 {
		t.Fatalf("POST /v1/chat/completions: %d %s (%v)", code, body, err)
	}

	// Another address moves it.
	addr2 := freeAddr(t)
	if st := setServer(t, s, true, addr2, ""); !st.Running || st.URL != "http://"+addr2+"/v1" {
		t.Fatalf("moved: %+v", st)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("the old address %s still accepts connections", addr)
	}

	if st := setServer(t, s, false, addr2, ""); st.Running || st.URL != "" || st.Error != "" {
		t.Fatalf("turned off: %+v", st)
	}
	if c, err := net.DialTimeout("tcp", addr2, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after the server was turned off", addr2)
	}
}

func TestServerPortInUse(t *testing.T) {
	s, _ := newService(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st := setServer(t, s, true, ln.Addr().String(), "")
	if st.Running || !st.Enabled || !strings.Contains(st.Error, "the port is in use") {
		t.Fatalf("on a port in use: %+v", st)
	}
	// Freed and switched on again (as the window's Retry does by saving).
	ln.Close()
	if st := s.server.apply(); !st.Running || st.Error != "" {
		t.Fatalf("after the port was freed: %+v", st)
	}
	addr := s.ServerStatus().URL
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.ServerStatus(); st.Running {
		t.Fatalf("after Close: %+v", st)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(addr, "http://"), "/v1")
	if c, err := net.DialTimeout("tcp", host, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Close", host)
	}
}
