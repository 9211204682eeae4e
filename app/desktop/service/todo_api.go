package service

// TEMPORARY: the surface the bound methods call, being implemented.

import (
	"errors"

	"nibble/app/settings"
)

var errNotYet = errors.New("not implemented yet")

func (s *Service) Models() ([]LocalModel, error)                      { return nil, errNotYet }
func (s *Service) AddModel(path string) (LocalModel, error)           { return LocalModel{}, errNotYet }
func (s *Service) ForgetModel(path string) error                      { return errNotYet }
func (s *Service) CheckLoad(req LoadRequest) (Estimate, error)        { return Estimate{}, errNotYet }
func (s *Service) ApplyContext(ctx int, kv string) (Status, error)    { return Status{}, errNotYet }
func (s *Service) Catalog() ([]CatalogEntry, error)                   { return nil, errNotYet }
func (s *Service) CatalogEstimate(id, quant string) (Estimate, error) { return Estimate{}, errNotYet }
func (s *Service) Download(id, quant string) (Download, error)        { return Download{}, errNotYet }
func (s *Service) CancelDownload(id, quant string)                    {}
func (s *Service) Downloads() []Download                              { return nil }
func (s *Service) Conversations(query string) ([]ConversationSummary, error) {
	return nil, errNotYet
}
func (s *Service) Conversation(id int64) (Conversation, error) { return Conversation{}, errNotYet }
func (s *Service) DeleteConversation(id int64) error           { return errNotYet }
func (s *Service) ExportConversation(id int64) (string, error) { return "", errNotYet }
func (s *Service) Settings() settings.Settings                 { return s.store.Get() }
func (s *Service) UpdateSettings(c settings.Settings) (settings.Settings, error) {
	return c, errNotYet
}
func (s *Service) Diagnostics() Diagnostics { return Diagnostics{} }
