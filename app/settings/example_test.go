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
	//   "version": 2,
	//   "lastModel": "/Users/ann/Models/Llama-3.2-3B-Instruct-Q4_K_M.gguf",
	//   "contextTokens": 8192,
	//   "kvType": "auto",
	//   "sampling": {
	//     "temperature": 0.7,
	//     "topP": 0.95,
	//     "topK": 40,
	//     "minP": 0.05,
	//     "repeatPenalty": 1
	//   },
	//   "systemPrompt": "",
	//   "theme": "system",
	//   "startAtLogin": false,
	//   "hotkey": "cmd+shift+space",
	//   "server": {
	//     "enabled": true,
	//     "address": "127.0.0.1:11435"
	//   },
	//   "slots": 2,
	//   "threads": 0,
	//   "quickActions": [
	//     {
	//       "name": "Summarize",
	//       "prompt": "Summarize the following text in a few sentences:\n\n{{text}}"
	//     },
	//     {
	//       "name": "Explain",
	//       "prompt": "Explain the following in simple terms:\n\n{{text}}"
	//     }
	//   ],
	//   "memoryLimit": 0,
	//   "modelFiles": [],
	//   "remoteEndpoints": [],
	//   "activeRemote": "",
	//   "documentMaxBytes": 16777216,
	//   "whenContextDoesNotFit": "refuse",
	//   "maxReplyTokens": 2048
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
