package settings

import (
	"fmt"
	"strings"
	"unicode"

	"nibble/app/remote"
)

// RemoteEndpoint is an OpenAI-compatible server (llama-server, Ollama,
// vLLM, another nibble serve) the model picker can use instead of a
// local model.
//
// Key is a secret: settings.json is written with mode 0600 (Save's
// temporary file is created so and renamed over it), and the service
// never hands it back to the window or puts it in Diagnostics. The macOS
// Keychain would be a better home for it.
type RemoteEndpoint struct {
	Name  string `json:"name"`
	URL   string `json:"url"`   // the API base, e.g. http://127.0.0.1:8080/v1
	Key   string `json:"key"`   // "" = none; sent as a bearer token
	Model string `json:"model"` // "" = the server's default model
	// ContextTokens is the model's context on that server (0: unknown,
	// the server's /v1/models figure or DefaultRemoteContext is used).
	ContextTokens int `json:"contextTokens"`
}

// Limits on the remote endpoints.
const (
	MaxRemoteEndpoints = 32
	maxRemoteName      = 64
	maxRemoteKey       = 4096
	maxRemoteModel     = 256
)

// RemotePrefix marks a remote model where a model is named by one string
// ("remote:<name>").
const RemotePrefix = "remote:"

// FindRemote returns the endpoint called name (case-insensitive).
func (s Settings) FindRemote(name string) (RemoteEndpoint, bool) {
	for _, e := range s.RemoteEndpoints {
		if strings.EqualFold(strings.TrimSpace(e.Name), strings.TrimSpace(name)) {
			return e, true
		}
	}
	return RemoteEndpoint{}, false
}

// checkRemote checks the remote endpoints and the active one.
func (s Settings) checkRemote(bad func(field, format string, args ...any)) {
	if len(s.RemoteEndpoints) > MaxRemoteEndpoints {
		bad("remoteEndpoints", "%d endpoints: at most %d", len(s.RemoteEndpoints), MaxRemoteEndpoints)
	}
	names := map[string]int{}
	for i, e := range s.RemoteEndpoints {
		field := fmt.Sprintf("remoteEndpoints[%d]", i)
		name := strings.TrimSpace(e.Name)
		switch {
		case name == "":
			bad(field+".name", "is empty")
		case len(name) > maxRemoteName:
			bad(field+".name", "is longer than %d bytes", maxRemoteName)
		case strings.IndexFunc(name, unicode.IsControl) >= 0:
			bad(field+".name", "%q contains a control character", name)
		default:
			if j, dup := names[strings.ToLower(name)]; dup {
				bad(field+".name", "%q is also the name of remoteEndpoints[%d]", e.Name, j)
			} else {
				names[strings.ToLower(name)] = i
			}
		}
		if _, err := remote.NormalizeURL(e.URL); err != nil {
			bad(field+".url", "%v", err)
		}
		if len(e.Key) > maxRemoteKey || strings.IndexFunc(e.Key, unicode.IsControl) >= 0 {
			// The key itself is never quoted in a message.
			bad(field+".key", "is longer than %d bytes or contains a control character", maxRemoteKey)
		}
		if len(e.Model) > maxRemoteModel || strings.IndexFunc(e.Model, unicode.IsControl) >= 0 {
			bad(field+".model", "is longer than %d bytes or contains a control character", maxRemoteModel)
		}
		if e.ContextTokens != 0 && (e.ContextTokens < MinContext || e.ContextTokens > MaxContext) {
			bad(field+".contextTokens", "%d is out of range: want %d to %d (0 = ask the server)", e.ContextTokens, MinContext, MaxContext)
		}
	}
	if s.ActiveRemote != "" {
		if _, ok := s.FindRemote(s.ActiveRemote); !ok {
			bad("activeRemote", "%q is not the name of a remote endpoint", s.ActiveRemote)
		}
	}
}
