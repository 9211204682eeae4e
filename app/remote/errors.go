package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind sorts a failure by what the user can do about it.
type Kind int

const (
	// Unreachable: no connection (refused, no route, DNS, TLS) or no
	// answer in time.
	Unreachable Kind = iota + 1
	// Unauthorized: 401 or 403, a key is missing or refused.
	Unauthorized
	// ModelNotFound: the server does not have the model asked for.
	ModelNotFound
	// NotCompatible: the server answered, but not as an OpenAI-compatible
	// API does (wrong path, HTML, JSON of another shape).
	NotCompatible
	// StreamCut: the reply stream ended or stalled before it was complete.
	StreamCut
	// ServerError: the server reported an error of its own (a 4xx or 5xx
	// with a message, or an error event inside the stream).
	ServerError
	// TooLarge: the server sent more than the client reads.
	TooLarge
)

func (k Kind) String() string {
	switch k {
	case Unreachable:
		return "unreachable"
	case Unauthorized:
		return "unauthorized"
	case ModelNotFound:
		return "model not found"
	case NotCompatible:
		return "not OpenAI-compatible"
	case StreamCut:
		return "stream cut"
	case ServerError:
		return "server error"
	case TooLarge:
		return "too large"
	}
	return "unknown"
}

// Error is every failure the client reports. Its text names the endpoint
// (never the key) and says what went wrong in words.
type Error struct {
	Kind     Kind
	Endpoint string // the base URL
	Status   int    // the HTTP status (0: none, e.g. unreachable)
	Message  string // what happened, including the server's own message when it gave one
	Err      error  // the underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Endpoint)
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is an *Error of kind k.
func IsKind(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

// serverError is an error object as the servers send it. OpenAI:
// {"error":{"message","type","param","code"}} with a string code;
// llama-server: the same with a numeric code; Ollama: {"error":"text"};
// vLLM: {"object":"error","message","type","code"} at the top level.
type serverError struct {
	Message string
	Type    string
	Code    string
}

// errorObject is an error object's fields, its code a string or a number.
type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (o errorObject) serverError() serverError {
	return serverError{Message: o.Message, Type: o.Type, Code: codeString(o.Code)}
}

// parseServerError finds an error object in body; ok is false when body
// holds none of the known shapes.
func parseServerError(body []byte) (serverError, bool) {
	var doc struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
		errorObject
		Detail json.RawMessage `json:"detail"` // FastAPI's validation errors
	}
	if json.Unmarshal(body, &doc) != nil {
		return serverError{}, false
	}
	if len(doc.Error) > 0 && string(doc.Error) != "null" {
		var s string
		if json.Unmarshal(doc.Error, &s) == nil {
			return serverError{Message: s}, s != ""
		}
		var o errorObject
		if json.Unmarshal(doc.Error, &o) == nil && (o.Message != "" || o.Type != "") {
			return o.serverError(), true
		}
		return serverError{}, false
	}
	if doc.Object == "error" && doc.Message != "" {
		return doc.serverError(), true
	}
	if len(doc.Detail) > 0 && string(doc.Detail) != "null" {
		var s string
		if json.Unmarshal(doc.Detail, &s) == nil && s != "" {
			return serverError{Message: s}, true
		}
		return serverError{Message: clip(string(doc.Detail), 300)}, true
	}
	return serverError{}, false
}

// bareServerError reads an error object without the {"error": …}
// wrapper, as llama-server's "error:" stream line carries it.
func bareServerError(body []byte) (serverError, bool) {
	var o errorObject
	if json.Unmarshal(body, &o) != nil || o.Message == "" {
		return serverError{}, false
	}
	return o.serverError(), true
}

// codeString is a code sent as a string or a number.
func codeString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

func (se serverError) String() string {
	msg := se.Message
	if msg == "" {
		msg = se.Type
	}
	if se.Code != "" && !strings.Contains(msg, se.Code) {
		msg += " (" + se.Code + ")"
	}
	return msg
}

// mentionsModel says whether a 404's error is about the model rather than
// the path: the OpenAI code, or the word in the message.
func (se serverError) mentionsModel() bool {
	return se.Code == "model_not_found" || strings.Contains(strings.ToLower(se.Message+" "+se.Type), "model")
}

// clip shortens s to n bytes for an error message, on a rune boundary.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// statusError turns an HTTP error response into an *Error: what the
// status means for the user, then the server's own message when its body
// has one. what says which request it was ("listing models").
func statusError(endpoint, what string, status int, body []byte, modelAsked string) *Error {
	se, ok := parseServerError(body)
	detail := ""
	if ok {
		detail = ": " + se.String()
	} else if t := clip(string(body), 200); t != "" && looksText(body) {
		detail = ": " + t
	}
	e := &Error{Endpoint: endpoint, Status: status}
	switch {
	case status == 401:
		e.Kind, e.Message = Unauthorized, fmt.Sprintf("%s: the server refused the API key (401)%s", what, detail)
	case status == 403:
		e.Kind, e.Message = Unauthorized, fmt.Sprintf("%s: access denied (403)%s", what, detail)
	case status == 404 && modelAsked != "" && ok && se.mentionsModel():
		e.Kind, e.Message = ModelNotFound, fmt.Sprintf("%s: the server has no model %q (404)%s", what, modelAsked, detail)
	case status == 404 || status == 405:
		e.Kind, e.Message = NotCompatible, fmt.Sprintf("%s: the server has no OpenAI-compatible API at this address (%d); the URL usually ends in /v1%s", what, status, detail)
	default:
		e.Kind, e.Message = ServerError, fmt.Sprintf("%s: the server answered %d%s", what, status, detail)
	}
	return e
}

// looksText: the body is worth quoting (not binary, not an HTML page).
func looksText(body []byte) bool {
	s := strings.TrimSpace(string(body))
	if strings.HasPrefix(s, "<") {
		return false
	}
	for _, r := range s {
		if r == 0xFFFD || (r < 0x20 && r != '\n' && r != '\r' && r != '\t') {
			return false
		}
	}
	return true
}
