package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/app/history"
	"nibble/app/settings"
)

func historyIDs(rec *recorder) []int64 {
	var ids []int64
	for _, ev := range rec.all(EventHistory) {
		ids = append(ids, ev.(HistoryChanged).ID)
	}
	return ids
}

func TestSendKeepsTheConversation(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	first := Message{Role: "user", Content: "Why is the sky blue?\nAnswer briefly."}
	res, err := s.Send(SendRequest{Messages: []Message{first}, MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	if res.ConversationID <= 0 {
		t.Fatalf("SendResult %+v: no conversation", res)
	}
	// The user's message is kept before the reply has started.
	c, err := s.Conversation(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) == 0 || c.Messages[0].Role != "user" || c.Messages[0].Content != first.Content {
		t.Fatalf("right after Send: %+v", c.Messages)
	}
	f := rec.final(t)
	c, err = s.Conversation(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Title != "Why is the sky blue?" || c.Model != DemoName || len(c.Messages) != 2 {
		t.Fatalf("conversation %q by %q: %+v", c.Title, c.Model, c.Messages)
	}
	reply := c.Messages[1]
	if reply.Role != "assistant" || reply.Content != f.Text || reply.Stats == nil ||
		reply.Stats.FinishReason != "length" || reply.Stats.GenTokens != 6 || reply.Stats.DecodeTokPerSec <= 0 {
		t.Fatalf("kept reply %+v (stats %+v), final %+v", reply, reply.Stats, f)
	}

	// A follow-up adds only its new message.
	follow := Message{Role: "user", Content: "And at sunset?"}
	res2, err := s.Send(SendRequest{ConversationID: res.ConversationID, MaxTokens: 4,
		Messages: []Message{first, {Role: "assistant", Content: f.Text}, follow}})
	if err != nil {
		t.Fatal(err)
	}
	if res2.ConversationID != res.ConversationID {
		t.Fatalf("the follow-up went to conversation %d", res2.ConversationID)
	}
	rec.final(t)
	c, _ = s.Conversation(res.ConversationID)
	if len(c.Messages) != 4 || c.Messages[2].Content != follow.Content || c.Messages[3].Role != "assistant" {
		t.Fatalf("after the follow-up: %+v", c.Messages)
	}
	for _, id := range historyIDs(rec) {
		if id != res.ConversationID {
			t.Fatalf("history:changed for %d", id)
		}
	}
	if n := len(historyIDs(rec)); n < 4 {
		t.Fatalf("%d history:changed events, want one per kept message", n)
	}

	list, err := s.Conversations("")
	if err != nil || len(list) != 1 || list[0].ID != res.ConversationID || list[0].Messages != 4 || list[0].UpdatedAt == "" {
		t.Fatalf("Conversations(\"\") = %+v, %v", list, err)
	}
	if found, err := s.Conversations("sunset"); err != nil || len(found) != 1 || !strings.Contains(found[0].Snippet, "sunset") {
		t.Fatalf("Conversations(sunset) = %+v, %v", found, err)
	}
	if none, err := s.Conversations("zebra"); err != nil || len(none) != 0 {
		t.Fatalf("Conversations(zebra) = %+v, %v", none, err)
	}
	md, err := s.ExportConversation(res.ConversationID)
	if err != nil || !strings.Contains(md, "Why is the sky blue?") || !strings.Contains(md, "And at sunset?") {
		t.Fatalf("export %q, %v", md, err)
	}
	if err := s.DeleteConversation(res.ConversationID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conversation(res.ConversationID); err == nil {
		t.Fatal("a deleted conversation was restored")
	}
	if list, _ := s.Conversations(""); len(list) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
	// A turn of a conversation deleted meanwhile starts a new one with the
	// whole exchange.
	res3, err := s.Send(SendRequest{ConversationID: res.ConversationID, MaxTokens: 2,
		Messages: []Message{first, {Role: "assistant", Content: f.Text}, follow}})
	if err != nil {
		t.Fatal(err)
	}
	rec.final(t)
	if res3.ConversationID == res.ConversationID || res3.ConversationID == 0 {
		t.Fatalf("a turn of a deleted conversation went to %d", res3.ConversationID)
	}
	if c, _ := s.Conversation(res3.ConversationID); len(c.Messages) != 4 {
		t.Fatalf("the new conversation holds %+v", c.Messages)
	}
}

// Turns that never start are not kept.
func TestRefusedSendsAreNotKept(t *testing.T) {
	s, _ := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, req := range []SendRequest{
		{},
		{Prompt: " \n "},
		{Messages: []Message{{Role: "user", Content: "  "}}},
		{Messages: []Message{{Role: "user", Content: strings.Repeat("word ", 2000)}}}, // past the context
	} {
		if res, err := s.Send(req); err == nil {
			t.Errorf("Send(%.30v) = %+v", req, res)
		}
	}
	if list, err := s.Conversations(""); err != nil || len(list) != 0 {
		t.Fatalf("refused sends were kept: %+v, %v", list, err)
	}
}

// A stopped reply is kept with what had streamed.
func TestStoppedReplyIsKept(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Go on"}}, MaxTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "some streamed text", func() bool { return rec.text(res.ReplyID) != "" })
	s.Stop(res.ReplyID)
	f := rec.final(t)
	if f.FinishReason != "cancelled" {
		t.Fatalf("final %+v", f)
	}
	c, _ := s.Conversation(res.ConversationID)
	if len(c.Messages) != 2 || c.Messages[1].Content != rec.text(res.ReplyID) || c.Messages[1].Stats.FinishReason != "cancelled" {
		t.Fatalf("kept %+v; streamed %q", c.Messages, rec.text(res.ReplyID))
	}
}

// Closing mid-reply (the app quits) keeps the reply as far as it went,
// and the database is intact for the next run.
func TestCloseMidReplyKeepsThePartialReply(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Tell me a long story"}}, MaxTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "some streamed text", func() bool { return rec.text(res.ReplyID) != "" })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	streamed := rec.text(res.ReplyID)
	h, err := history.Open(filepath.Join(s.dirs.Data, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := h.Get(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 2 || c.Messages[1].Content != streamed || c.Messages[1].Stats.FinishReason != "cancelled" {
		t.Fatalf("after Close: %+v; streamed %q", c.Messages, streamed)
	}
	if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}}); err == nil {
		t.Fatal("Send after Close succeeded")
	}
}

// Without a usable history file the chat still works, and Status says
// conversations are not kept.
func TestChatWithoutHistory(t *testing.T) {
	s, rec := newServiceWith(t, func(d settings.Dirs) {
		if err := os.Mkdir(filepath.Join(d.Data, HistoryFile), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if st.State != StateReady || !strings.Contains(st.Error, "conversations are not being kept") {
		t.Fatalf("status %+v", st)
	}
	res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 3})
	if err != nil || res.ConversationID != 0 {
		t.Fatalf("Send = %+v, %v", res, err)
	}
	if f := rec.final(t); f.FinishReason != "length" {
		t.Fatalf("final %+v", f)
	}
	if _, err := s.Conversations(""); err == nil || !strings.Contains(err.Error(), "not being kept") {
		t.Fatalf("Conversations = %v", err)
	}
}
