package settings

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestRemoteEndpointsValidate(t *testing.T) {
	good := RemoteEndpoint{Name: "Lab vLLM", URL: "https://gpu.example.com/v1", Key: "sk-123", Model: "qwen2.5-72b", ContextTokens: 32768}
	s := Defaults()
	s.RemoteEndpoints = []RemoteEndpoint{good, {Name: "ollama", URL: "http://127.0.0.1:11434"}}
	s.ActiveRemote = "lab vllm" // names compare without case
	if err := s.Validate(); err != nil {
		t.Fatalf("valid endpoints refused: %v", err)
	}
	if e, ok := s.FindRemote("OLLAMA"); !ok || e.URL != "http://127.0.0.1:11434" {
		t.Errorf("FindRemote = %+v, %v", e, ok)
	}

	bad := Defaults()
	bad.RemoteEndpoints = []RemoteEndpoint{
		{Name: "", URL: "http://h/v1"},
		{Name: "a", URL: "ftp://h/v1"},
		{Name: "A", URL: "localhost:8080"},
		{Name: "b", URL: "http://h/v1", Key: "sk-secret\n", ContextTokens: 100},
		{Name: "c\x01", URL: "http://u:p@h/v1", Model: strings.Repeat("m", 300)},
	}
	bad.ActiveRemote = "nobody"
	err := bad.Validate()
	want := map[string]string{
		"remoteEndpoints[0].name":          "is empty",
		"remoteEndpoints[1].url":           "http:// or https://",
		"remoteEndpoints[2].name":          `"A" is also the name of remoteEndpoints[1]`,
		"remoteEndpoints[2].url":           "http:// or https://",
		"remoteEndpoints[3].key":           "control character",
		"remoteEndpoints[3].contextTokens": "100 is out of range",
		"remoteEndpoints[4].name":          "control character",
		"remoteEndpoints[4].url":           "key field",
		"remoteEndpoints[4].model":         "longer than 256",
		"activeRemote":                     `"nobody" is not the name`,
	}
	got := map[string]string{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if errors.As(e, &fe) {
			got[fe.Field] = fe.Msg
		}
	}
	for field, msg := range want {
		if !strings.Contains(got[field], msg) {
			t.Errorf("%s: %q, want a message containing %q", field, got[field], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("errors for %d fields, want %d: %v", len(got), len(want), got)
	}
	if strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("a validation message shows the key: %v", err)
	}
}

// The settings file holds API keys: only its owner may read it.
func TestSettingsFileIsPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	path := filepath.Join(t.TempDir(), "settings.json")
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(s *Settings) error {
		s.RemoteEndpoints = []RemoteEndpoint{{Name: "r", URL: "http://127.0.0.1:9/v1", Key: "sk-private"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("settings.json has mode %o, want 600", perm)
	}
	back, err := Load(path)
	if err != nil || len(back.RemoteEndpoints) != 1 || back.RemoteEndpoints[0].Key != "sk-private" {
		t.Errorf("reloaded: %+v, %v", back.RemoteEndpoints, err)
	}
}
