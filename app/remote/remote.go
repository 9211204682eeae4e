// Package remote is a small client for OpenAI-compatible servers
// (llama-server, Ollama's /v1, vLLM, LM Studio, another `nibble serve`):
// it lists their models (GET /v1/models) and streams chat replies (POST
// /v1/chat/completions with "stream": true, read as server-sent events).
//
// Every failure is an *Error whose Kind says what the user can do:
// unreachable, a refused key, a model the server lacks, an answer that is
// not OpenAI-compatible, a stream cut short, the server's own error. The
// key is sent as a bearer token and appears in no error or log. What the
// client reads is bounded: a models list, an error body, one event and a
// whole stream each have a limit.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of Options' zero fields.
const (
	DefaultConnectTimeout = 10 * time.Second
	// DefaultFirstByteTimeout bounds the wait for the response headers: a
	// server may send them only with the first token, after the prompt's
	// prefill, which on a long document takes a while.
	DefaultFirstByteTimeout = 2 * time.Minute
	// DefaultStallTimeout bounds the silence between two pieces of a
	// stream.
	DefaultStallTimeout = 2 * time.Minute
	DefaultMaxListBytes = 4 << 20   // a models list
	DefaultMaxEvent     = 1 << 20   // one server-sent event
	DefaultMaxStream    = 256 << 20 // one whole reply stream
	maxErrorBody        = 64 << 10  // an error response's body
)

// Options tune a Client; zero fields take the defaults.
type Options struct {
	ConnectTimeout   time.Duration
	FirstByteTimeout time.Duration
	StallTimeout     time.Duration
	MaxListBytes     int64
	MaxEventBytes    int
	MaxStreamBytes   int64
	// Transport replaces the HTTP transport (tests); its timeouts are then
	// its own.
	Transport http.RoundTripper
}

// Client talks to one endpoint. It is safe for concurrent use.
type Client struct {
	base string // the API base, e.g. "http://127.0.0.1:8080/v1" (no trailing slash)
	key  string
	opts Options
	http *http.Client
}

// NormalizeURL checks an endpoint's URL and returns its API base: an
// http or https URL with a host, no user name or password (the key has
// its own field, and a URL is shown in messages), no query or fragment. A
// bare host ("http://127.0.0.1:8080") gets "/v1", where OpenAI-compatible
// servers put their API; any other path is kept as given.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("the URL is empty: want e.g. http://127.0.0.1:8080/v1")
	}
	if !strings.Contains(raw, "://") {
		return "", fmt.Errorf("%q: the URL must start with http:// or https://", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: want e.g. http://127.0.0.1:8080/v1", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: the URL must start with http:// or https://", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%q has no host: want e.g. http://127.0.0.1:8080/v1", raw)
	}
	if u.User != nil {
		return "", errors.New("the URL holds a user name or password: put the API key in the key field instead")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: the URL must not have a query or fragment", raw)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	if path == "" {
		path = "/v1"
	}
	return u.Scheme + "://" + u.Host + path, nil
}

// New makes a client for the endpoint at rawURL (see NormalizeURL) with an
// optional API key.
func New(rawURL, key string, opts Options) (*Client, error) {
	base, err := NormalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(key, "\r\n") {
		return nil, errors.New("the API key contains a line break")
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.FirstByteTimeout <= 0 {
		opts.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.MaxListBytes <= 0 {
		opts.MaxListBytes = DefaultMaxListBytes
	}
	if opts.MaxEventBytes <= 0 {
		opts.MaxEventBytes = DefaultMaxEvent
	}
	if opts.MaxStreamBytes <= 0 {
		opts.MaxStreamBytes = DefaultMaxStream
	}
	rt := opts.Transport
	if rt == nil {
		rt = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   opts.ConnectTimeout,
			ResponseHeaderTimeout: opts.FirstByteTimeout,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   4,
			ForceAttemptHTTP2:     true,
		}
	}
	return &Client{base: base, key: strings.TrimSpace(key), opts: opts, http: &http.Client{Transport: rt}}, nil
}

// CloseIdleConnections closes the connections kept for the next request;
// a reply being streamed keeps its own.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Base is the API base URL requests go to (no key in it).
func (c *Client) Base() string { return c.base }

// Host is the endpoint's host[:port], for labels.
func (c *Client) Host() string {
	if u, err := url.Parse(c.base); err == nil {
		return u.Host
	}
	return c.base
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID string `json:"id"`
	// ContextTokens is the context the server says the model has (0: it
	// does not say). Read from "context_length" (nibble serve, LM Studio)
	// or "max_model_len" (vLLM).
	ContextTokens int    `json:"contextTokens"`
	OwnedBy       string `json:"ownedBy,omitempty"`
}

// Models lists the endpoint's models.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	const what = "listing models"
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout+c.opts.FirstByteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/models", nil)
	if err != nil {
		return nil, &Error{Kind: NotCompatible, Endpoint: c.base, Message: what, Err: err}
	}
	c.authorize(req)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, statusError(c.base, what, resp.StatusCode, body, "")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxListBytes+1))
	if err != nil {
		return nil, &Error{Kind: StreamCut, Endpoint: c.base, Message: what + ": the answer was cut short", Err: err}
	}
	if int64(len(body)) > c.opts.MaxListBytes {
		return nil, &Error{Kind: TooLarge, Endpoint: c.base, Message: fmt.Sprintf("%s: the answer is larger than %d bytes", what, c.opts.MaxListBytes)}
	}
	return parseModels(c.base, body)
}

func parseModels(endpoint string, body []byte) ([]Model, error) {
	var doc struct {
		Data *[]struct {
			ID            string          `json:"id"`
			OwnedBy       string          `json:"owned_by"`
			ContextLength json.RawMessage `json:"context_length"`
			MaxModelLen   json.RawMessage `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Data == nil {
		why := "no \"data\" list"
		if err != nil {
			why = "not JSON"
		}
		if !looksText(body) {
			why += ", perhaps a web page"
		}
		return nil, &Error{Kind: NotCompatible, Endpoint: endpoint, Status: http.StatusOK,
			Message: "listing models: the answer is not an OpenAI-compatible models list (" + why + ")"}
	}
	models := make([]Model, 0, len(*doc.Data))
	for _, m := range *doc.Data {
		if strings.TrimSpace(m.ID) == "" {
			continue
		}
		n := positiveInt(m.ContextLength)
		if n == 0 {
			n = positiveInt(m.MaxModelLen)
		}
		models = append(models, Model{ID: m.ID, ContextTokens: n, OwnedBy: m.OwnedBy})
	}
	return models, nil
}

// positiveInt reads a JSON number that is a positive int, else 0.
func positiveInt(raw json.RawMessage) int {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f < 1 || f > 1<<40 || f != float64(int64(f)) {
		return 0
	}
	return int(f)
}

func (c *Client) authorize(req *http.Request) {
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
}

// transportError describes a request that got no response.
func (c *Client) transportError(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%s: %w", what, context.Canceled)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // the URL is in Endpoint already
	}
	msg := what + ": the server cannot be reached"
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		msg = what + ": the server did not answer in time"
	}
	return &Error{Kind: Unreachable, Endpoint: c.base, Message: msg, Err: err}
}
