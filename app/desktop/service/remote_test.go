package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"nibble/app/server"
	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/scheduler"
)

const remoteKey = "sk-remote-test-key"

// secondServer is another Nibble's OpenAI-compatible server on loopback,
// on its own scheduler with its own tiny model, as `nibble serve` runs it.
func secondServer(t *testing.T, token string) (*httptest.Server, *server.Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "second-q8_0.gguf")
	tinyModel(t, path, 4096)
	sched := scheduler.New(scheduler.Config{Slots: 1, Threads: 2})
	t.Cleanup(func() { sched.Close() })
	if _, err := sched.Load(path, engine.Options{Ctx: 2048}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	h, err := server.New(sched, server.Config{Addr: ts.Listener.Addr().String(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = h
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, h
}

// The acceptance test without the window: the app, pointed at a second
// Nibble server as its remote endpoint, chats through it, and the turn is
// kept as a local one would be.
func TestRemoteChatThroughSecondServer(t *testing.T) {
	ts, h := secondServer(t, remoteKey)
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	local := s.Status().Model

	in := RemoteEndpointInput{Name: "second", URL: ts.URL, Key: remoteKey}
	models, err := s.RemoteModels(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 1 || models[0].ID != "second-q8_0" || models[0].ContextTokens != 2048 {
		t.Fatalf("models = %+v, want the second server's one model with its 2048 context", models)
	}
	in.Model = models[0].ID
	list, err := s.SaveRemoteEndpoint(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].URL != ts.URL+"/v1" || !list[0].HasKey || list[0].Active {
		t.Fatalf("endpoints = %+v", list)
	}
	st, err := s.UseRemote("second")
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(ts.URL, "http://")
	if st.Remote == nil || st.Remote.Name != "second" || st.Remote.Host != host || st.Remote.Ctx != 2048 || !st.Remote.Remote {
		t.Fatalf("status after UseRemote: remote %+v", st.Remote)
	}
	if st.Model == nil || st.Model.Path != local.Path {
		t.Fatalf("the local model did not stay loaded: %+v", st.Model)
	}

	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Hello over there"}}, MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if f.ID != res.ReplyID || f.FinishReason == "error" || f.FinishReason == "cancelled" {
		t.Fatalf("final = %+v", f)
	}
	if f.Text == "" || f.Text != rec.text(res.ReplyID) {
		t.Fatalf("final text %q, streamed %q", f.Text, rec.text(res.ReplyID))
	}
	if f.GenTokens < 1 || f.GenTokens > 12 || f.PromptTokens < 3 || f.TTFTMs <= 0 {
		t.Fatalf("final counts = %+v, want the server's usage and a time to first token", f)
	}
	stats := h.Stats()
	if stats.Requests != 1 || stats.Completed != 1 || stats.CompletionTokens != int64(f.GenTokens) {
		t.Fatalf("second server's stats %+v after one reply of %d tokens", stats, f.GenTokens)
	}
	conv, err := s.Conversation(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if conv.Model != "second (remote)" || len(conv.Messages) != 2 || conv.Messages[1].Content != f.Text {
		t.Fatalf("kept conversation = %+v", conv)
	}

	// Where requests go, and the key nowhere the window sees.
	d := s.Diagnostics()
	if !strings.Contains(d.ChatTarget, ts.URL+"/v1/chat/completions") {
		t.Errorf("Diagnostics.ChatTarget = %q", d.ChatTarget)
	}
	for what, v := range map[string]any{"Diagnostics": d, "Settings": s.Settings(), "RemoteEndpoints": s.RemoteEndpoints(), "Status": s.Status()} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), remoteKey) {
			t.Errorf("%s shows the key: %s", what, b)
		}
	}
	// A window's settings (without keys) saved back keep the key.
	if _, err := s.UpdateSettings(s.Settings()); err != nil {
		t.Fatal(err)
	}
	if ep, _ := s.store.Get().FindRemote("second"); ep.Key != remoteKey {
		t.Errorf("saving the window's settings lost the key")
	}

	// Loading a local model makes it the one chats go to again.
	if _, err := s.LoadModel(LoadRequest{Path: local.Path}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Remote != nil || s.store.Get().ActiveRemote != "" {
		t.Fatalf("after a local load: remote %+v, active %q", st.Remote, s.store.Get().ActiveRemote)
	}
	if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "and here"}}, MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	rec.final(t)
	if n := h.Stats().Requests; n != 1 {
		t.Errorf("the second server got %d requests, want 1: the local model should have answered", n)
	}
}

// slowSSE streams numbered pieces until its client goes, and reports that.
func slowSSE(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"slow"}]}`)
			return
		case "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		defer close(gone)
		for i := 0; ; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func useRemote(t *testing.T, s *Service, name, url, model string) {
	t.Helper()
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: name, URL: url, Model: model}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseRemote(name); err != nil {
		t.Fatal(err)
	}
}

// Stop cancels a remote reply: the connection closes (the server sees its
// client go) and the reply ends as cancelled, kept with what streamed.
func TestRemoteStop(t *testing.T) {
	gone := make(chan struct{})
	ts := httptest.NewServer(slowSSE(gone))
	defer ts.Close()
	s, rec := newService(t) // no local model loaded: the remote one is enough
	useRemote(t, s, "slow", ts.URL, "slow")
	if st := s.Status(); st.State != StateReady || st.Model != nil || st.Remote == nil {
		t.Fatalf("status with only a remote model: %+v", st)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "go on"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "streamed text", func() bool { return strings.Count(rec.text(res.ReplyID), "w") >= 3 })
	s.Stop(res.ReplyID)
	f := rec.final(t)
	if f.FinishReason != "cancelled" || !strings.HasPrefix(f.Text, "w0 w1 w2 ") {
		t.Fatalf("final = %+v", f)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the client go within 5s of Stop")
	}
	conv, err := s.Conversation(res.ConversationID)
	if err != nil || len(conv.Messages) != 2 || conv.Messages[1].Stats.FinishReason != "cancelled" {
		t.Fatalf("kept: %+v, %v", conv, err)
	}
}

// An endpoint that cannot be reached fails Send at once, says so, and
// keeps nothing.
func TestRemoteUnreachable(t *testing.T) {
	gone := make(chan struct{})
	ts := httptest.NewServer(slowSSE(gone))
	s, _ := newService(t)
	useRemote(t, s, "away", ts.URL, "slow")
	ts.Close()
	before, _ := s.Conversations("")
	_, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "anyone?"}}})
	if err == nil || !strings.Contains(err.Error(), `remote model "away"`) || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("Send = %v, want an unreachable error naming the endpoint", err)
	}
	after, _ := s.Conversations("")
	if len(after) != len(before) {
		t.Errorf("a failed send was kept: %d conversations, had %d", len(after), len(before))
	}
	// UseRemote checks the endpoint first.
	if _, err := s.UseRemote("away"); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("UseRemote on a closed server = %v", err)
	}
}

func TestRemoteEndpointsEditing(t *testing.T) {
	ts := httptest.NewServer(slowSSE(make(chan struct{})))
	defer ts.Close()
	s, _ := newService(t)
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "bad", URL: "localhost:8080"}); err == nil ||
		!strings.Contains(err.Error(), "url: ") || !strings.Contains(err.Error(), "http:// or https://") {
		t.Errorf("a URL without a scheme: %v", err)
	}
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "", URL: ts.URL}); err == nil || !strings.Contains(err.Error(), "name: is empty") {
		t.Errorf("an endpoint without a name: %v", err)
	}
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "tiny", URL: ts.URL, ContextTokens: 100}); err == nil ||
		!strings.HasPrefix(err.Error(), "context tokens: 100 is out of range") {
		t.Errorf("a context below the minimum, in the form's words: %v", err)
	}
	if len(s.RemoteEndpoints()) != 0 {
		t.Fatalf("refused endpoints were kept: %+v", s.RemoteEndpoints())
	}
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "lab", URL: ts.URL, Key: "k1", Model: "missing"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseRemote("lab"); err == nil || !strings.Contains(err.Error(), `has no model "missing" (it lists: slow)`) {
		t.Errorf("UseRemote with a model the server lacks = %v", err)
	}
	// Saved again without a key: the key stays.
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "lab", URL: ts.URL, Model: "slow", ContextTokens: 16384}); err != nil {
		t.Fatal(err)
	}
	if ep, _ := s.store.Get().FindRemote("lab"); ep.Key != "k1" || ep.Model != "slow" {
		t.Errorf("after saving without a key: %+v", ep)
	}
	if _, err := s.UseRemote("lab"); err != nil {
		t.Fatal(err)
	}
	// The document planner's counter: approximate, on the endpoint's
	// context with the margin.
	count, ctx, err := s.docs.tokenCounter()
	if err != nil || count("abcdefg") != 3 || ctx != 14745 { // 90% of 16384
		t.Errorf("tokenCounter: count(7 bytes) = %d, ctx %d, %v", count("abcdefg"), ctx, err)
	}
	list, err := s.RemoveRemoteEndpoint("LAB")
	if err != nil || len(list) != 0 || s.store.Get().ActiveRemote != "" || s.Status().Remote != nil {
		t.Errorf("after removing the active endpoint: %+v, %v, active %q", list, err, s.store.Get().ActiveRemote)
	}
	s.remote.mu.Lock()
	kept := len(s.remote.clients)
	s.remote.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d remote clients (with their keys) kept after the endpoint was removed", kept)
	}
	if _, err := s.RemoveRemoteEndpoint("lab"); err == nil {
		t.Error("removing an unknown endpoint succeeded")
	}
}

// The context of a remote model: the endpoint's, else what its server
// reported, else DefaultRemoteContext.
func TestRemoteContext(t *testing.T) {
	s, _ := newService(t)
	ep := settings.RemoteEndpoint{Name: "x", URL: "http://127.0.0.1:9/v1", Model: "m"}
	if n := s.remote.contextOf(ep); n != DefaultRemoteContext {
		t.Errorf("nothing known: %d", n)
	}
	s.remote.mu.Lock()
	s.remote.ctx = map[string]int{remoteCtxKey("http://127.0.0.1:9/v1", "m"): 32768}
	s.remote.mu.Unlock()
	if n := s.remote.contextOf(ep); n != 32768 {
		t.Errorf("reported by the server: %d", n)
	}
	ep.ContextTokens = 4096
	if n := s.remote.contextOf(ep); n != 4096 {
		t.Errorf("set on the endpoint: %d", n)
	}
}

// A local load that will not fit mentions the remote model when one is
// configured.
func TestNotFitAdviceMentionsRemote(t *testing.T) {
	s, _, long := loadedService(t)
	setLimit(t, s, total(t, s, long, 2048, "f16")+1<<20)
	req := LoadRequest{Path: long, Ctx: 131072, KV: "f16"}
	_, err := s.LoadModel(req)
	var nf *NotFitError
	if !errors.As(err, &nf) || strings.Contains(err.Error(), "remote") {
		t.Fatalf("without an endpoint: %v", err)
	}
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "Lab vLLM", URL: "http://127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.LoadModel(req)
	if !errors.As(err, &nf) || !strings.HasSuffix(err.Error(), "\nOr use the remote model Lab vLLM (Models → Remote)") {
		t.Fatalf("with an endpoint: %v", err)
	}
	e, err := s.CheckLoad(req)
	if err != nil || e.Advice[len(e.Advice)-1] != "Or use the remote model Lab vLLM (Models → Remote)" {
		t.Fatalf("CheckLoad advice = %q, %v", e.Advice, err)
	}
	// Only for what will not fit.
	e, err = s.CheckLoad(LoadRequest{Path: long, Ctx: 1024, KV: "q4"})
	if err != nil || e.Verdict == "will-not-fit" || strings.Contains(strings.Join(e.Advice, " "), "remote") {
		t.Fatalf("a load that fits: %+v, %v", e, err)
	}
}

// The demo model's cap on reply length is the demo's: a remote model in
// use gets the request as asked, with the settings' sampling.
func TestRemoteRequestNotCappedByDemo(t *testing.T) {
	bodies := make(chan map[string]any, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		bodies <- body
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer ts.Close()
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Model == nil || !st.Model.Demo {
		t.Fatalf("want the demo model loaded: %+v", st.Model)
	}
	useRemote(t, s, "r", ts.URL, "m")
	if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	body := <-bodies
	if f := rec.final(t); f.FinishReason != "stop" || f.Text != "ok" {
		t.Fatalf("final = %+v", f)
	}
	if max := body["max_tokens"]; max != float64(settings.DefaultMaxReplyTokens) || body["model"] != "m" || body["stream"] != true {
		t.Errorf("request body = %v: want max_tokens the settings' limit (not the demo's cap), model m, streamed", body)
	}
	if temp, want := body["temperature"], float64(s.Settings().Sampling.Temperature); temp == nil || float32(temp.(float64)) != float32(want) {
		t.Errorf("temperature %v, want the settings' %v", temp, want)
	}
}

// Replies from a remote model share the endpoint's connections: a chat of
// many turns does not leave a connection (and its goroutines) per turn.
func TestRemoteRepliesReuseConnections(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"object":"list","data":[{"id":"quick"}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer ts.Close()
	s, rec := newService(t)
	useRemote(t, s, "quick", ts.URL, "quick")
	turn := func() {
		if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		if f := rec.final(t); f.Text != "ok" {
			t.Fatalf("final = %+v", f)
		}
	}
	turn() // the first connection
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	const turns = 8
	for range turns {
		turn()
	}
	time.Sleep(50 * time.Millisecond)
	if grown := runtime.NumGoroutine() - before; grown >= turns {
		t.Fatalf("%d more goroutines after %d replies: a connection kept per reply", grown, turns)
	}
}
