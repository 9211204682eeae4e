package desktop

import (
	"slices"
	"testing"

	"nibble/app/desktop/service"
)

// The status item names where chats go: a remote model in use, as such,
// rather than the local model that stays loaded.
func TestModelChangedNamesTheRemoteModel(t *testing.T) {
	plat := &fakePlatform{}
	d := &Desktop{Platform: plat}
	local := &service.Model{Name: "Tiny Llama"}
	d.modelChanged(service.Status{State: service.StateReady, Model: local})
	d.modelChanged(service.Status{State: service.StateReady, Model: local, Remote: &service.Model{Name: "lab", Remote: true}})
	d.modelChanged(service.Status{State: service.StateReady, Model: local})
	want := []string{"Tiny Llama", "lab (remote)", "Tiny Llama"}
	if !slices.Equal(plat.models, want) {
		t.Fatalf("ModelChanged calls %q, want %q", plat.models, want)
	}
}
