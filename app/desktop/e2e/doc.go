// Package e2e is the app's end-to-end test: TestAppE2E starts the real app
// (built with -tags dev,webkit2_41, so that besides its WebKitGTK window on
// a virtual X display it serves the frontend and a websocket bridge to its
// Go bindings) and lets headless Chromium, through playwright-core, use it
// as a person would: chat, Stop, the context budget, loads that do not fit,
// a catalog download from a local server, history, and a quit
// mid-reply. `make app-e2e` builds the app and runs it.
//
// The package also holds Blank, the check that a screenshot shows
// something, which cmd/shotcheck runs on the production window's
// screenshot.
package e2e
