package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nibble/engine"
	"nibble/engine/scheduler"
	"nibble/internal/testdata"
)

const tinyModel = "tiny-qwen2-q4_0.gguf"

// loadScheduler starts a scheduler with the tiny model loaded.
func loadScheduler(t testing.TB, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	td := testdata.Dir(t)
	s := scheduler.New(cfg)
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(filepath.Join(td, "models", tinyModel), engine.Options{Ctx: 4096}); err != nil {
		t.Fatal(err)
	}
	return s
}

// serve starts the handler over sched on 127.0.0.1, port 0.
func serve(t testing.TB, sched *scheduler.Scheduler, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	cfg.Addr = ts.Listener.Addr().String()
	srv, err := New(sched, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv
	ts.Start()
	t.Cleanup(ts.Close)
	return srv, ts
}

func newServer(t testing.TB) (*Server, *httptest.Server) {
	return serve(t, loadScheduler(t, scheduler.Config{}), Config{})
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

// errorOf checks OpenAI's error shape and returns its fields.
func (r response) errorOf(t testing.TB) (msg, typ, param, code string) {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("status %d: no error object in %s", r.status, r.body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error without %q: %s", k, r.body)
		}
	}
	msg, _ = e["message"].(string)
	typ, _ = e["type"].(string)
	param, _ = e["param"].(string)
	code, _ = e["code"].(string)
	return
}

func do(t testing.TB, method, url, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if strings.EqualFold(header[i], "Host") {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, b}
}

func post(t testing.TB, url, body string, header ...string) response {
	t.Helper()
	return do(t, http.MethodPost, url, body, header...)
}

// sse reads a text/event-stream body into its data payloads.
func sse(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			blank = true
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !blank {
			t.Fatalf("not one data line per event: %q", line)
		}
		blank = false
		out = append(out, data)
	}
	return out
}

func postStream(t testing.TB, url, body string) (http.Header, []string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	return res.Header, sse(t, res.Body)
}

func TestModels(t *testing.T) {
	_, ts := newServer(t)
	r := do(t, "GET", ts.URL+"/v1/models", "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || list.Object != "list" || len(list.Data) != 1 {
		t.Fatalf("%s", r.body)
	}
	m := list.Data[0]
	if m["id"] != "tiny-qwen2-q4_0" || m["object"] != "model" || m["owned_by"] != "nibble" || m["created"].(float64) <= 0 || m["context_length"] != 4096.0 {
		t.Fatalf("model entry: %s", r.body)
	}
	// The id is stable: derived from the file name only.
	if got := ModelID("/x/My Model (Q4_K_M).GGUF"); got != "my-model-q4_k_m" {
		t.Fatalf("ModelID: %q", got)
	}
	if r := do(t, "GET", ts.URL+"/v1/models/tiny-qwen2-q4_0", ""); r.status != 200 || r.json(t)["id"] != "tiny-qwen2-q4_0" {
		t.Fatalf("retrieve: %d %s", r.status, r.body)
	}
	r = do(t, "GET", ts.URL+"/v1/models/gpt-4o", "")
	if msg, typ, _, code := r.errorOf(t); r.status != 404 || code != "model_not_found" || typ != "invalid_request_error" || !strings.Contains(msg, "tiny-qwen2-q4_0") {
		t.Fatalf("unknown model: %d %s", r.status, r.body)
	}
}

type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeCompletion(t testing.TB, r response) chatCompletion {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var c chatCompletion
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

const greedyChat = `{"model":"tiny-qwen2-q4_0","messages":[{"role":"user","content":"Hello"}],"temperature":0,"max_tokens":12,"ignore_eos":true%s}`

// A non-streamed chat completion has OpenAI's shape; at temperature 0 it
// is reproducible.
func TestChatCompletion(t *testing.T) {
	srv, ts := newServer(t)
	c := decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(greedyChat, "")))
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Model != "tiny-qwen2-q4_0" || c.Created == 0 ||
		len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content == "" ||
		c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "length" {
		t.Fatalf("%+v", c)
	}
	u := c.Usage
	if u == nil || u.CompletionTokens != 12 || u.PromptTokens < 2 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Fatalf("usage %+v", u)
	}
	again := decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(greedyChat, "")))
	if again.Choices[0].Message.Content != c.Choices[0].Message.Content || again.ID == c.ID {
		t.Fatalf("temperature 0 differs: %q vs %q", again.Choices[0].Message.Content, c.Choices[0].Message.Content)
	}
	// Content as text parts, a developer message, and max_completion_tokens.
	parts := `{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hel"},{"type":"text","text":"lo"}]},{"role":"assistant","content":null},{"role":"user","content":"Again"}],"max_completion_tokens":3,"ignore_eos":true}`
	if c := decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", parts)); c.Usage.CompletionTokens != 3 || c.Model != "tiny-qwen2-q4_0" {
		t.Fatalf("%+v", c)
	}
	if st := srv.Stats(); st.Requests != 3 || st.Completed != 3 || st.Active != 0 || st.CompletionTokens != 27 {
		t.Fatalf("stats %+v", st)
	}
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// A streamed chat completion: a role chunk, content chunks, a chunk with
// the finish reason, the usage chunk when asked for, then [DONE]; its text
// is the non-streamed reply's.
func TestChatCompletionStream(t *testing.T) {
	_, ts := newServer(t)
	want := decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(greedyChat, ""))).Choices[0].Message.Content

	for _, includeUsage := range []bool{false, true} {
		extra := `,"stream":true`
		if includeUsage {
			extra += `,"stream_options":{"include_usage":true}`
		}
		h, events := postStream(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(greedyChat, extra))
		if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" {
			t.Fatalf("headers %v", h)
		}
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("last event %q", events[len(events)-1])
		}
		var text strings.Builder
		var finish string
		var usageSeen bool
		for i, data := range events[:len(events)-1] {
			var c chunk
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			var raw map[string]json.RawMessage
			json.Unmarshal([]byte(data), &raw)
			if _, has := raw["usage"]; has != includeUsage {
				t.Fatalf("chunk %d: usage field present %v, include_usage %v: %s", i, has, includeUsage, data)
			}
			if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != "tiny-qwen2-q4_0" || c.Created == 0 {
				t.Fatalf("chunk %d: %s", i, data)
			}
			if c.Usage != nil {
				if len(c.Choices) != 0 || i != len(events)-2 || c.Usage.CompletionTokens != 12 || c.Usage.TotalTokens != c.Usage.PromptTokens+12 {
					t.Fatalf("usage chunk %d: %s", i, data)
				}
				usageSeen = true
				continue
			}
			if len(c.Choices) != 1 || c.Choices[0].Delta == nil {
				t.Fatalf("chunk %d: %s", i, data)
			}
			d := c.Choices[0].Delta
			if (i == 0) != (d.Role != nil) || i == 0 && *d.Role != "assistant" {
				t.Fatalf("role only in the first chunk: %d %s", i, data)
			}
			if d.Content != nil {
				text.WriteString(*d.Content)
			}
			if fr := c.Choices[0].FinishReason; fr != nil {
				if finish != "" || d.Content != nil {
					t.Fatalf("finish chunk %d: %s", i, data)
				}
				finish = *fr
			}
		}
		if finish != "length" || usageSeen != includeUsage || text.String() != want {
			t.Fatalf("include_usage %v: finish %q usage %v text %q want %q", includeUsage, finish, usageSeen, text.String(), want)
		}
	}
}

// /v1/completions, streamed and not, with a string prompt or an array of
// one; the two agree.
func TestCompletions(t *testing.T) {
	_, ts := newServer(t)
	body := `{"model":"tiny-qwen2-q4_0.gguf","prompt":%s,"temperature":0,"max_tokens":8,"ignore_eos":true%s}`
	c := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(body, `"Once upon a time"`, "")))
	if !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || len(c.Choices) != 1 || c.Choices[0].Text == "" ||
		*c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 8 || c.Model != "tiny-qwen2-q4_0" {
		t.Fatalf("%s", c.ID)
	}
	arr := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(body, `["Once upon a time"]`, "")))
	if arr.Choices[0].Text != c.Choices[0].Text {
		t.Fatalf("array prompt: %q vs %q", arr.Choices[0].Text, c.Choices[0].Text)
	}
	_, events := postStream(t, ts.URL+"/v1/completions", fmt.Sprintf(body, `"Once upon a time"`, `,"stream":true,"stream_options":{"include_usage":true}`))
	var text strings.Builder
	var finish string
	for _, data := range events[:len(events)-2] {
		var ch chunk
		json.Unmarshal([]byte(data), &ch)
		if ch.Object != "text_completion" || len(ch.Choices) != 1 || ch.Choices[0].Text == nil || ch.Choices[0].Delta != nil {
			t.Fatalf("chunk %s", data)
		}
		text.WriteString(*ch.Choices[0].Text)
		if ch.Choices[0].FinishReason != nil {
			finish = *ch.Choices[0].FinishReason
		}
	}
	var last chunk
	json.Unmarshal([]byte(events[len(events)-2]), &last)
	if text.String() != c.Choices[0].Text || finish != "length" || last.Usage == nil || last.Usage.CompletionTokens != 8 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("streamed %q finish %q last %s", text.String(), finish, events[len(events)-2])
	}
}

// stop (a string or an array) ends the reply before the stop string with
// finish_reason "stop", streamed or not; a seed makes sampling repeatable.
func TestStopAndSeed(t *testing.T) {
	_, ts := newServer(t)
	body := `{"prompt":"The quick brown fox","temperature":0,"max_tokens":24,"ignore_eos":true%s}`
	full := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(body, ""))).Choices[0].Text
	runes := []rune(full)
	if len(runes) < 12 {
		t.Fatalf("short reply %q", full)
	}
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	want := full[:strings.Index(full, stop)]
	for _, s := range []string{fmt.Sprintf(`,"stop":%q`, stop), fmt.Sprintf(`,"stop":["never-seen-xyz",%q]`, stop)} {
		c := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(body, s)))
		if c.Choices[0].Text != want || *c.Choices[0].FinishReason != "stop" {
			t.Fatalf("stop %s: %q (%s), want %q", s, c.Choices[0].Text, *c.Choices[0].FinishReason, want)
		}
		_, events := postStream(t, ts.URL+"/v1/completions", fmt.Sprintf(body, s+`,"stream":true`))
		var text strings.Builder
		for _, data := range events[:len(events)-1] {
			var ch chunk
			json.Unmarshal([]byte(data), &ch)
			text.WriteString(*ch.Choices[0].Text)
		}
		if text.String() != want || !strings.Contains(events[len(events)-2], `"finish_reason":"stop"`) {
			t.Fatalf("streamed with stop: %q, want %q; %s", text.String(), want, events[len(events)-2])
		}
	}

	sampled := `{"prompt":"The quick brown fox","temperature":1.2,"top_p":0.9,"presence_penalty":0.5,"frequency_penalty":0.5,"max_tokens":16,"ignore_eos":true,"seed":%d}`
	a := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(sampled, 42))).Choices[0].Text
	b := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(sampled, 42))).Choices[0].Text
	c := decodeCompletion(t, post(t, ts.URL+"/v1/completions", fmt.Sprintf(sampled, 7))).Choices[0].Text
	if a != b || a == c {
		t.Fatalf("seed 42 twice: %q, %q; seed 7: %q", a, b, c)
	}
}

// The request fields map onto the engine's parameters.
func TestParams(t *testing.T) {
	var c common
	if err := json.Unmarshal([]byte(`{"temperature":0.5,"top_p":0.9,"max_tokens":7,"stop":"END","seed":-1,"presence_penalty":1.5,"frequency_penalty":-0.5,"top_k":5,"min_p":0.1,"repeat_penalty":1.1,"ignore_eos":true}`), &c); err != nil {
		t.Fatal(err)
	}
	p, e := c.params()
	if e != nil {
		t.Fatal(e.msg)
	}
	sp := p.Sample
	if p.MaxTokens != 7 || len(p.Stop) != 1 || p.Stop[0] != "END" || !p.IgnoreEOS || sp.Temperature != 0.5 || sp.TopP != 0.9 || sp.Seed != 1<<64-1 ||
		sp.PresencePenalty != 1.5 || sp.FrequencyPenalty != -0.5 || sp.TopK != 5 || sp.MinP != float32(0.1) || sp.RepeatPenalty != float32(1.1) {
		t.Fatalf("%+v", p)
	}
	var d common
	p, _ = d.params()
	q, _ := d.params()
	if p.MaxTokens != 0 || p.Sample.Temperature != 0.8 || p.Sample.TopK != 40 || p.Stop != nil || p.Sample.Seed == q.Sample.Seed {
		t.Fatalf("defaults %+v %+v", p, q)
	}
}

// Bad requests get a 4xx in OpenAI's error shape that names the field.
func TestValidationErrors(t *testing.T) {
	_, ts := newServer(t)
	chatURL, cmplURL := ts.URL+"/v1/chat/completions", ts.URL+"/v1/completions"
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		url, body   string
		status      int
		param, code string
		msg         string // a fragment of the message
	}{
		{chatURL, ``, 400, "", "", "empty"},
		{chatURL, `{"messages":[`, 400, "", "", "not valid JSON"},
		{chatURL, `{"messages":[]} {}`, 400, "", "", "not valid JSON"},
		{chatURL, `[1,2]`, 400, "", "", "must be a JSON object"},
		{chatURL, `{}`, 400, "messages", "", "messages is required"},
		{chatURL, `{"messages":[]}`, 400, "messages", "", "must not be empty"},
		{chatURL, `{"messages":"hi"}`, 400, "messages", "", "messages must be an array, not string"},
		{chatURL, `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages[0].role", "", `"tool" is not supported`},
		{chatURL, `{"messages":[{"role":"user","content":"a"},{"role":"wizard","content":"x"}]}`, 400, "messages[1].role", "", "wizard"},
		{chatURL, `{"messages":[{"content":"x"}]}`, 400, "messages[0].role", "", "role is required"},
		{chatURL, `{"messages":[{"role":"user"}]}`, 400, "messages[0].content", "", "content is required"},
		{chatURL, `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", "", "string or an array"},
		{chatURL, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content[0].type", "", "only text"},
		{chatURL, `{"messages":[{"role":5,"content":"x"}]}`, 400, "messages.role", "", "must be a string, not number"},
		{chatURL, `{` + msgs + `,"temperature":"hot"}`, 400, "temperature", "", "temperature must be a number, not string"},
		{chatURL, `{` + msgs + `,"temperature":3}`, 400, "temperature", "", "between 0 and 2"},
		{chatURL, `{` + msgs + `,"top_p":1.5}`, 400, "top_p", "", "between 0 and 1"},
		{chatURL, `{` + msgs + `,"max_tokens":0}`, 400, "max_tokens", "", "at least 1"},
		{chatURL, `{` + msgs + `,"max_tokens":2.5}`, 400, "max_tokens", "", "must be an integer"},
		{chatURL, `{` + msgs + `,"max_tokens":5,"max_completion_tokens":6}`, 400, "max_completion_tokens", "", "disagree"},
		{chatURL, `{` + msgs + `,"stop":5}`, 400, "stop", "", "string or an array of strings"},
		{chatURL, `{` + msgs + `,"stream":"yes"}`, 400, "stream", "", "true or false"},
		{chatURL, `{` + msgs + `,"n":2}`, 400, "n", "", "n must be 1"},
		{chatURL, `{` + msgs + `,"presence_penalty":-3}`, 400, "presence_penalty", "", "between -2 and 2"},
		{chatURL, `{` + msgs + `,"logprobs":true}`, 400, "logprobs", "", "not supported"},
		{chatURL, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, 400, "tools", "", "not supported"},
		{chatURL, `{` + msgs + `,"response_format":{"type":"json_object"}}`, 400, "response_format", "", "json_object"},
		{chatURL, `{` + msgs + `,"model":"gpt-4o"}`, 404, "model", "model_not_found", `"gpt-4o" is not loaded`},
		{cmplURL, `{}`, 400, "prompt", "", "prompt is required"},
		{cmplURL, `{"prompt":""}`, 400, "prompt", "", "must not be empty"},
		{cmplURL, `{"prompt":[1,2,3]}`, 400, "prompt", "", "token-id prompts are not supported"},
		{cmplURL, `{"prompt":["a","b"]}`, 400, "prompt", "", "exactly one string"},
		{cmplURL, `{"prompt":"a","echo":true}`, 400, "echo", "", "not supported"},
		{cmplURL, `{"prompt":"a","max_tokens":100000}`, 400, "prompt", "context_length_exceeded", "context budget is 4096"},
		{chatURL, `{` + msgs + `,"max_tokens":5000}`, 400, "messages", "context_length_exceeded", "5000 more were asked for"},
		{chatURL, `{` + msgs + `,"top_logprobs":3}`, 400, "top_logprobs", "", "needs logprobs: true"},
		{chatURL, `{` + msgs + `,"top_logprobs":0,"logprobs":false}`, 400, "top_logprobs", "", "needs logprobs: true"},
		{cmplURL, `{"prompt":"a","top_logprobs":2}`, 400, "top_logprobs", "", "needs logprobs: true"},
		// max_tokens near 2^63 must not overflow the context check.
		{chatURL, `{` + msgs + `,"max_tokens":9223372036854775807}`, 400, "messages", "context_length_exceeded", "9223372036854775807 more were asked for"},
		{chatURL, `{` + msgs + `,"max_completion_tokens":9223372036854775800}`, 400, "messages", "context_length_exceeded", "context budget is 4096"},
		{cmplURL, `{"prompt":"a","max_tokens":9223372036854775807}`, 400, "prompt", "context_length_exceeded", "context budget is 4096"},
	}
	for _, c := range cases {
		r := post(t, c.url, c.body)
		msg, typ, param, code := r.errorOf(t)
		if r.status != c.status || typ != "invalid_request_error" || param != c.param || code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: got %d %s, want %d param %q code %q message with %q", c.body, r.status, r.body, c.status, c.param, c.code, c.msg)
		}
	}
	// The model name may be omitted, or given as the file's name.
	for _, m := range []string{``, `"model":"",`, `"model":"TINY-QWEN2-Q4_0.gguf",`} {
		if r := post(t, chatURL, `{`+m+msgs+`,"max_tokens":1}`); r.status != 200 {
			t.Errorf("model %s: %d %s", m, r.status, r.body)
		}
	}
}

// --any-model accepts any name for the loaded model; with no model loaded,
// generation is 503 and the model list is empty.
func TestAnyModelAndNoModel(t *testing.T) {
	_, ts := serve(t, loadScheduler(t, scheduler.Config{}), Config{AnyModel: true})
	if c := decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)); c.Model != "tiny-qwen2-q4_0" {
		t.Fatalf("any model: %+v", c)
	}

	empty := scheduler.New(scheduler.Config{})
	t.Cleanup(func() { empty.Close() })
	_, ts = serve(t, empty, Config{})
	r := do(t, "GET", ts.URL+"/v1/models", "")
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"data":[],"object":"list"}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, url := range []string{ts.URL + "/v1/chat/completions", ts.URL + "/v1/completions"} {
		r := post(t, url, `{"messages":[{"role":"user","content":"hi"}],"prompt":"hi"}`)
		if msg, typ, _, code := r.errorOf(t); r.status != 503 || typ != "server_error" || code != "model_not_loaded" || !strings.Contains(msg, "no model is loaded") {
			t.Fatalf("%s: %d %s", url, r.status, r.body)
		}
	}
}

// Unknown routes are 404, wrong methods 405 with Allow, both in the error
// shape.
func TestRoutes(t *testing.T) {
	_, ts := newServer(t)
	r := do(t, "GET", ts.URL+"/v1/embeddings", "")
	if _, _, _, code := r.errorOf(t); r.status != 404 || code != "not_found" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = do(t, "GET", ts.URL+"/", "")
	if r.status != 404 {
		t.Fatalf("/: %d", r.status)
	}
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/chat/completions", "POST, OPTIONS"},
		{"PUT", "/v1/completions", "POST, OPTIONS"},
		{"POST", "/v1/models", "GET, OPTIONS"},
		{"DELETE", "/v1/models/tiny-qwen2-q4_0", "GET, OPTIONS"},
	} {
		r := do(t, c.method, ts.URL+c.path, "")
		if _, _, _, code := r.errorOf(t); r.status != 405 || code != "method_not_allowed" || r.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %v %s", c.method, c.path, r.status, r.header, r.body)
		}
	}
	if r := do(t, "OPTIONS", ts.URL+"/v1/models", ""); r.status != 204 || r.header.Get("Allow") != "GET, OPTIONS" {
		t.Fatalf("OPTIONS: %d %v", r.status, r.header)
	}
}

// A body over the limit is refused with 413.
func TestBodyLimit(t *testing.T) {
	_, ts := serve(t, loadScheduler(t, scheduler.Config{}), Config{MaxBodyBytes: 1024})
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	r := post(t, ts.URL+"/v1/chat/completions", big)
	if msg, _, _, code := r.errorOf(t); r.status != 413 || code != "request_too_large" || !strings.Contains(msg, "1024 bytes") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	small := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 500) + `"}],"max_tokens":1}`
	if r := post(t, ts.URL+"/v1/chat/completions", small); r.status != 200 {
		t.Fatalf("under the limit: %d %s", r.status, r.body)
	}
	if DefaultMaxBodyBytes != 8<<20 {
		t.Fatal("the default limit is 8 MiB")
	}
}

// A queue beyond its limit gives 429 with Retry-After.
func TestBusy(t *testing.T) {
	srv, ts := serve(t, loadScheduler(t, scheduler.Config{Slots: 1, QueueLimit: 1}), Config{RetryAfter: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := `{"prompt":"Tell me a story","max_tokens":3000,"ignore_eos":true,"stream":true}`
	var wg sync.WaitGroup
	for range 2 { // one runs, one waits
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(long))
			if res, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
	}
	waitFor(t, "two accepted requests", func() bool { return srv.Stats().Active == 2 })
	r := post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`)
	if msg, _, _, code := r.errorOf(t); r.status != 429 || code != "rate_limit_exceeded" || r.header.Get("Retry-After") != "2" || !strings.Contains(msg, "busy") {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	cancel()
	wg.Wait()
	waitFor(t, "both cancelled", func() bool { st := srv.Stats(); return st.Active == 0 && st.Cancelled == 2 })
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A client that disconnects cancels its generation, streamed or not: the
// request ends "cancelled" after a few tokens of its 3000, and the slot is
// free for the next request at once.
func TestDisconnectCancels(t *testing.T) {
	srv, ts := serve(t, loadScheduler(t, scheduler.Config{Slots: 1}), Config{})
	long := `{"messages":[{"role":"user","content":"Tell me a long story"}],"max_tokens":3000,"ignore_eos":true%s}`

	// Streamed: read a few chunks, then hang up.
	res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(fmt.Sprintf(long, `,"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(res.Body)
	for n := 0; n < 5; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	res.Body.Close()
	waitFor(t, "the streamed request to be cancelled", func() bool { return srv.Stats().Cancelled == 1 })
	st := srv.Stats()
	if st.Active != 0 || st.Completed != 0 || st.CancelledCompletionTokens >= 1000 {
		t.Fatalf("after a hang-up: %+v", st)
	}
	t.Logf("streamed: cancelled after %d of 3000 tokens", st.CancelledCompletionTokens)

	// Not streamed: the client gives up while the reply is generated.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(long, "")))
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the request to start", func() bool { return srv.Stats().Active == 1 })
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-done
	waitFor(t, "the second request to be cancelled", func() bool { return srv.Stats().Cancelled == 2 })
	st = srv.Stats()
	if st.Active != 0 || st.CancelledCompletionTokens >= 2000 {
		t.Fatalf("after giving up: %+v", st)
	}
	// The only slot is free: a new request is answered at once.
	start := time.Now()
	decodeCompletion(t, post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":2}`))
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the next request took %s", d)
	}
}

// Unloading the model mid-stream ends the stream with an error event and
// without [DONE]: a cut-short reply never looks complete.
func TestUnloadEndsStreamWithError(t *testing.T) {
	sched := loadScheduler(t, scheduler.Config{})
	srv, ts := serve(t, sched, Config{})
	res, err := http.Post(ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once","max_tokens":3000,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	waitFor(t, "the request to start", func() bool { return srv.Stats().Active == 1 })
	if err := sched.Unload(); err != nil {
		t.Fatal(err)
	}
	events := sse(t, res.Body)
	last := events[len(events)-1]
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(last), &e); err != nil || e.Error.Code != "model_unloaded" || e.Error.Type != "server_error" || strings.Contains(strings.Join(events, ""), "[DONE]") {
		t.Fatalf("last event %q", last)
	}
	if st := srv.Stats(); st.Cancelled != 1 || st.Completed != 0 {
		t.Fatalf("%+v", st)
	}
}

// Requests beyond the slots wait in the queue and all complete; at
// temperature 0 each gets what it gets alone.
func TestConcurrentRequestsQueue(t *testing.T) {
	srv, ts := serve(t, loadScheduler(t, scheduler.Config{Slots: 2, QueueLimit: 16}), Config{})
	body := `{"messages":[{"role":"user","content":"Hi %d"}],"temperature":0,"max_tokens":16,"ignore_eos":true}`
	want := make([]string, 3)
	for i := range want {
		want[i] = decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(body, i))).Choices[0].Message.Content
	}
	const n = 9
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = decodeCompletion(t, post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(body, i%3))).Choices[0].Message.Content
		}()
	}
	wg.Wait()
	for i := range n {
		if got[i] != want[i%3] {
			t.Errorf("request %d: %q, alone %q", i, got[i], want[i%3])
		}
	}
	if st := srv.Stats(); st.Completed != n+3 || st.Active != 0 || st.Rejected != 0 {
		t.Fatalf("%+v", st)
	}
}

// /v1/completions continues the prompt: with a SentencePiece vocabulary the
// first word keeps its leading space ("Answer:" → " 6265-96"), as
// llama-server's completions do.
func TestCompletionKeepsLeadingSpace(t *testing.T) {
	_, ts := serve(t, loadSPM(t, 512), Config{})
	r := post(t, ts.URL+"/v1/completions", `{"prompt":"Answer:","max_tokens":3,"temperature":0}`)
	var c struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.body, &c); err != nil || r.status != 200 || len(c.Choices) != 1 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	// The tiny model's greedy continuation of "Answer:" starts with the word "▁scoring".
	if got := c.Choices[0].Text; !strings.HasPrefix(got, " scoring") {
		t.Errorf("completion %q, want it to start with %q", got, " scoring")
	}
}

// loadSPM starts a scheduler with the SentencePiece test model in a context
// of ctx tokens.
func loadSPM(t testing.TB, ctx int) *scheduler.Scheduler {
	t.Helper()
	s := scheduler.New(scheduler.Config{})
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(filepath.Join(testdata.Dir(t), "models", "tiny-llama-spm-q4_0.gguf"), engine.Options{Ctx: ctx}); err != nil {
		t.Fatal(err)
	}
	return s
}

// A reply that runs to the context's end reports at most the context in
// total_tokens, and ignore_eos never writes an end-of-generation token.
func TestUsageAtTheContextsEnd(t *testing.T) {
	const ctx = 64
	_, ts := serve(t, loadSPM(t, ctx), Config{})
	r := post(t, ts.URL+"/v1/completions", `{"prompt":"Answer:","temperature":0,"ignore_eos":true}`)
	var c struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &c); err != nil || r.status != 200 || len(c.Choices) != 1 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	if c.Usage.TotalTokens != ctx || c.Choices[0].FinishReason != "length" || strings.Contains(c.Choices[0].Text, "</s>") {
		t.Errorf("usage %+v, finish %q in a context of %d", c.Usage, c.Choices[0].FinishReason, ctx)
	}
}
