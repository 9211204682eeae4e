package service

import "nibble/app/settings"

// Settings are the user's settings as they are in force.
// The remote endpoints' keys are left out: the window never needs them.
func (s *Service) Settings() settings.Settings { return withoutKeys(s.store.Get()) }

// UpdateSettings validates c and saves it, and returns what is in force.
// An invalid c changes nothing; the error lists every bad field, a line
// each ("sampling.temperature: 7 is out of range: want 0 to 5 (0 =
// greedy)").
//
// Sampling, the system prompt and the memory limit apply to the next
// reply and estimate. What the engine was made with applies at the next
// load: contextTokens and kvType (ApplyContext changes the loaded
// model's at once), slots and threads. lastModel and modelFiles are the
// service's own (LoadModel, AddModel, ForgetModel change them), so the
// values in c are ignored: a window holding older settings cannot undo a
// load or an added model. The same goes for promptTemplates
// (SavePromptTemplate, ClearPromptTemplate).
func (s *Service) UpdateSettings(c settings.Settings) (settings.Settings, error) {
	if c.Version == 0 {
		c.Version = settings.SchemaVersion // a window that never read it
	}
	err := s.store.Update(func(cur *settings.Settings) error {
		c.LastModel, c.ModelFiles = cur.LastModel, cur.ModelFiles
		c.PromptTemplates = cur.PromptTemplates // SavePromptTemplate's
		// The remote endpoints have methods of their own, and their keys
		// never reach the window to come back from it.
		c.RemoteEndpoints, c.ActiveRemote = cur.RemoteEndpoints, cur.ActiveRemote
		if err := c.Validate(); err != nil {
			return err // *settings.FieldErrors joined: a line each
		}
		*cur = c
		return nil
	})
	if err == nil {
		s.server.apply() // the local server's switch, address and token
		s.emit(EventSettings, s.Settings())
	}
	return s.Settings(), err
}
