package settings_test

import (
	"fmt"
	"os"
	"path/filepath"

	"nibble/app/settings"
)

// The file format: what Save writes.
func ExampleSave() {
	dir, _ := os.MkdirTemp("", "nibble")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "settings.json")

	s := settings.Defaults()
	s.LastModel = "/Users/ann/Models/Llama-3.2-3B-Instruct-Q4_K_M.gguf"
	s.ContextTokens = 8192
	s.Sampling = settings.Sampling{Temperature: 0.7, TopP: 0.95, TopK: 40, MinP: 0.05, RepeatPenalty: 1}
	s.Hotkey = "cmd+shift+space"
	s.Server.Enabled = true
	s.QuickActions = s.QuickActions[:2]
	if err := settings.Save(path, s); err != nil {
		fmt.Println(err)
		return
	}
	data, _ := os.ReadFile(path)
	fmt.Print(string(data))
	// Output:
	// {
	//   "version": 1,
	//   "last_model": "/Users/ann/Models/Llama-3.2-3B-Instruct-Q4_K_M.gguf",
	//   "context_tokens": 8192,
	//   "kv_type": "auto",
	//   "sampling": {
	//     "temperature": 0.7,
	//     "top_p": 0.95,
	//     "top_k": 40,
	//     "min_p": 0.05,
	//     "repeat_penalty": 1
	//   },
	//   "system_prompt": "",
	//   "theme": "system",
	//   "start_at_login": false,
	//   "hotkey": "cmd+shift+space",
	//   "server": {
	//     "enabled": true,
	//     "address": "127.0.0.1:11435"
	//   },
	//   "slots": 2,
	//   "threads": 0,
	//   "quick_actions": [
	//     {
	//       "name": "Summarize",
	//       "prompt": "Summarize the following text in a few sentences:\n\n{{text}}"
	//     },
	//     {
	//       "name": "Explain",
	//       "prompt": "Explain the following in simple terms:\n\n{{text}}"
	//     }
	//   ],
	//   "memory_limit": 0,
	//   "model_files": [],
	//   "remote_endpoints": [],
	//   "active_remote": "",
	//   "document_max_bytes": 67108864,
	//   "when_context_does_not_fit": "refuse"
	// }
}

// How the app starts: find the folders, create them, open the settings,
// show a warning if the file had to be set aside.
func ExampleOpen() {
	root, _ := os.MkdirTemp("", "nibble")
	defer os.RemoveAll(root)
	if old, ok := os.LookupEnv(settings.HomeEnv); ok {
		defer os.Setenv(settings.HomeEnv, old)
	} else {
		defer os.Unsetenv(settings.HomeEnv)
	}
	os.Setenv(settings.HomeEnv, root) // a portable install, as tests use

	dirs, err := settings.DefaultDirs()
	if err == nil {
		err = dirs.Ensure()
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := settings.Open(dirs.SettingsFile())
	switch {
	case settings.IsWarning(err):
		fmt.Println("show once:", err)
	case err != nil:
		fmt.Println("running on defaults; changes will not be saved:", err)
	}
	err = store.Update(func(s *settings.Settings) error {
		s.Theme = "dark"
		return nil
	})
	fmt.Println(store.Get().Theme, err)
	// Output:
	// dark <nil>
}
