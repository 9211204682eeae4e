package desktop

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"nibble/app/desktop/service"
	"nibble/app/settings"
)

type noWindow struct{}

func (noWindow) Show()                {}
func (noWindow) Hide()                {}
func (noWindow) SetPosition(int, int) {}

func TestAutotestFromEnv(t *testing.T) {
	t.Setenv(AutotestEnv, "hi")
	t.Setenv(AutotestStopEnv, "7")
	if got := autotestFromEnv(); got != (Autotest{Prompt: "hi", StopAfter: 7}) {
		t.Fatalf("%+v", got)
	}
	t.Setenv(AutotestStopEnv, "-3")
	if got := autotestFromEnv(); got.StopAfter != 0 {
		t.Fatalf("negative stop-after kept: %+v", got)
	}
}

// Events reach the window only after Startup; with an autotest prompt set,
// each final event also prints one line.
func TestEmit(t *testing.T) {
	t.Setenv(settings.HomeEnv, t.TempDir())
	t.Setenv(AutotestEnv, "hello")
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	var out bytes.Buffer
	d.log = &out
	var got []string
	d.emit(service.EventStatus, service.Status{}) // before Startup: dropped
	var emit service.Emitter = func(name string, _ any) { got = append(got, name) }
	d.emitTo.Store(&emit)
	d.emit(service.EventDelta, service.Delta{ID: "r1", Text: "x"})
	d.emit(service.EventFinal, service.Final{ID: "r1", FinishReason: "stop", GenTokens: 3, DecodeTokPerSec: 12.5})
	if strings.Join(got, ",") != "chat:delta,chat:final" {
		t.Fatalf("window got %v", got)
	}
	if want := "autotest: reply r1 ended (stop): 3 tokens, first token after 0 ms, 12.5 tok/s\n"; out.String() != want {
		t.Fatalf("log %q, want %q", out.String(), want)
	}
}

// Startup loads the demo model (synthesized on a first run) in the
// background and reports it ready.
func TestStartup(t *testing.T) {
	t.Setenv(settings.HomeEnv, t.TempDir())
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	ready := make(chan service.Status, 1)
	d.Startup(context.Background(), noWindow{}, func(name string, data any) {
		if st, ok := data.(service.Status); ok && st.State != service.StateLoading && st.State != service.StatePreparing {
			select {
			case ready <- st:
			default:
			}
		}
	})
	select {
	case st := <-ready:
		if st.State != service.StateReady || st.Model == nil || !st.Model.Demo {
			t.Fatalf("status %+v", st)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("not ready within two minutes")
	}
	if a := d.App.Autotest(); a.Prompt != "" {
		t.Fatalf("autotest %+v without the variable", a)
	}
}
