package desktop

// TEMPORARY: desktop-side methods being implemented.

import (
	"errors"

	"nibble/app/desktop/service"
)

func (a *App) chooseModelFile() (string, error) { return "", errors.New("not implemented yet") }
func (a *App) loadModel(req service.LoadRequest) (service.Status, error) {
	return a.svc.LoadModel(req.Path)
}
func (a *App) saveConversation(int64) (string, error) { return "", errors.New("not implemented yet") }
func (a *App) hideWindow()                            {}
func (a *App) quit()                                  {}
