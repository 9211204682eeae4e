package service

import (
	"errors"
	"strings"
	"testing"

	"nibble/app/settings"
)

func TestRunQuickActionOnText(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if got := s.QuickActions(); len(got) != 5 || got[0].Name != "Summarize" {
		t.Fatalf("quick actions %+v, want the five defaults", got)
	}
	res, err := s.RunQuickAction("  explain ", "The mitochondria is the powerhouse of the cell.")
	if err != nil {
		t.Fatal(err)
	}
	want := "Explain the following in simple terms:\n\nThe mitochondria is the powerhouse of the cell."
	if res.Name != "Explain" || res.Prompt != want || res.ReplyID == "" || res.ConversationID == 0 {
		t.Fatalf("result %+v", res)
	}
	f := rec.final(t)
	if f.ID != res.ReplyID || f.FinishReason == "error" || f.GenTokens == 0 {
		t.Fatalf("final %+v", f)
	}
	c, err := s.Conversation(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Title != "Explain" || len(c.Messages) != 2 || c.Messages[0].Content != want || c.Messages[1].Content != f.Text {
		t.Fatalf("kept conversation %+v, want titled Explain with the filled prompt and the reply", c)
	}
}

func TestRunQuickActionRefuses(t *testing.T) {
	s, _ := newService(t)
	if _, err := s.RunQuickAction("Summarize", "some text"); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Fatalf("before a model is loaded: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"", " \n\t "} {
		if _, err := s.RunQuickAction("Summarize", text); !errors.Is(err, ErrEmptyClipboard) {
			t.Errorf("text %q: %v, want ErrEmptyClipboard", text, err)
		}
	}
	_, err := s.RunQuickAction("Rhyme", "text")
	if err == nil || !strings.Contains(err.Error(), `no quick action named "Rhyme"`) || !strings.Contains(err.Error(), `"Draft a reply"`) {
		t.Fatalf("unknown action: %v, want one that lists the actions", err)
	}

	// The context is 1024 tokens: this is several times that, and is
	// refused with the count rather than cut.
	long := strings.Repeat("word ", 3000)
	_, err = s.RunQuickAction("Summarize", long)
	if err == nil || !strings.Contains(err.Error(), "too long") || !strings.Contains(err.Error(), "context budget is 1024 tokens") {
		t.Fatalf("long text: %v", err)
	}
	if list, err := s.Conversations(""); err != nil || len(list) != 0 {
		t.Fatalf("refused actions left conversations: %v %+v", err, list)
	}

	// Just under the budget still leaves too little for the answer.
	var fits, tooLong string
	for n := 10; n < 1024; n += 10 {
		text := strings.Repeat("word ", n)
		if s.quick.checkFits(settings.Defaults().QuickActions[0], SendRequest{Messages: []Message{{Role: "user", Content: settings.Defaults().QuickActions[0].Render(text)}}}) != nil {
			tooLong = text
			break
		}
		fits = text
	}
	if fits == "" || tooLong == "" {
		t.Fatalf("no boundary found between fitting and refused texts")
	}
	r, err := s.chat.request(SendRequest{Messages: []Message{{Role: "user", Content: settings.Defaults().QuickActions[0].Render(tooLong)}}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.loader.engine().Tokenize(r)
	if err != nil {
		t.Fatal(err)
	}
	if room := min(QuickReplyRoom, DemoMaxTokens); len(ids)+room <= 1024 || len(ids) >= 1024 {
		t.Fatalf("refused at %d prompt tokens: want refused because fewer than %d are left of 1024, not because the prompt alone overflows", len(ids), room)
	}
}

func TestHotkeyStatus(t *testing.T) {
	s, _ := newService(t)
	if st := s.HotkeyStatus(); st.Supported || st.Hotkey != "" || st.Error != "" {
		t.Fatalf("no platform, no setting: %+v", st)
	}
	c := s.Settings()
	c.Hotkey = "cmd+shift+space"
	if _, err := s.UpdateSettings(c); err != nil {
		t.Fatal(err)
	}
	if st := s.HotkeyStatus(); st.Supported || !strings.Contains(st.Error, "macOS only") {
		t.Fatalf("a hotkey set where none can be registered: %+v", st)
	}
	s.SetHotkeyStatus(HotkeyStatus{Supported: true, Hotkey: "cmd+shift+space"})
	if st := s.HotkeyStatus(); !st.Supported || st.Hotkey != "cmd+shift+space" || st.Error != "" {
		t.Fatalf("registered: %+v", st)
	}
}
