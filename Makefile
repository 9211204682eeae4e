# Nibble build. `make run` and `make test` work on a fresh Debian 12 machine
# as root: `make deps` installs what they need first.
SHELL := /bin/bash
GO_VERSION := 1.26.8
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
# An older system Go fetches the pinned toolchain through the module proxy.
export GOTOOLCHAIN := go$(GO_VERSION)
export CGO_ENABLED := 0

BIN := bin/nibble
UNAME := $(shell uname -s)
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nibble
DEMO := $(CACHE)/demo-llama-q8_0.gguf
TESTDATA := ../shared/testdata
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.7.0

.PHONY: all deps build run run-cli test vet lint fmt-check cross-vet go-test fuzz clean \
	app app-deps run-deps frontend frontend-check bindings app-vet app-check \
	e2e-deps app-dev frontend-test app-e2e app-shot

all: build

# Install the toolchain when missing (fresh Debian 12, as root).
deps:
	@command -v go >/dev/null || { \
	  echo "installing Go (Debian golang-go, which then fetches go$(GO_VERSION))"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go git ca-certificates >/dev/null; }
	@go version
	@command -v gcc >/dev/null || { \
	  echo "installing gcc (the race detector needs cgo)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null; }
	@[ "$(UNAME)" = Darwin ] || command -v clang-19 >/dev/null || { \
	  echo "installing clang-19 (the MSL emulator builds the .metal kernels with it)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 >/dev/null; }

build: deps
	go build -trimpath -o $(BIN) .

# The demo model has random weights (nothing is downloaded): it shows the
# engine streaming, not sensible text.
$(DEMO): | build
	@mkdir -p $(CACHE)
	$(BIN) synth --arch llama --layers 4 --embd 512 --heads 8 --kv-heads 2 --ff 1536 \
	  --type q8_0 --seed 7 -o $(DEMO)

# The document Q&A demo: a small model trained to answer questions about a
# document (app/desktop/demo/README.md), checked in, and a sample document
# with planted facts. `make demo-model` rebuilds the file from the F16
# original in $(TESTDATA)/trained; `make run` uses the checked-in file.
DEMO_MODEL := app/desktop/demo/nibble-docqa-demo.gguf
DEMO_DOC := app/desktop/demo/sample-document.txt
DEMO_QUESTION := What is the access code for Camila Mack?
DEMO_ANSWER := 6265-96
DEMO_ENV := NIBBLE_START_MODEL=$(CURDIR)/$(DEMO_MODEL) NIBBLE_START_DOCUMENT=$(CURDIR)/$(DEMO_DOC)

.PHONY: demo-model
demo-model: build
	$(BIN) quantize -m $(TESTDATA)/trained/nibble-docqa-29m-f16.gguf -o $(DEMO_MODEL) --type q4_0 \
	  --chat-template app/desktop/demo/chat_template.jinja --override tokenizer.ggml.eot_token_id=u32:13
	sha256sum $(DEMO_MODEL)

# The app on the document Q&A demo, with the sample document attached and
# a question about it typed in. Without a display it runs on a virtual one,
# sends the question through the UI and saves a screenshot of the answer
# with its source.
run: app
	@if [ "$(UNAME)" = Darwin ]; then $(DEMO_ENV) NIBBLE_START_QUESTION="$(DEMO_QUESTION)" build/bin/Nibble.app/Contents/MacOS/Nibble; \
	elif [ -n "$$DISPLAY" ]; then $(DEMO_ENV) NIBBLE_START_QUESTION="$(DEMO_QUESTION)" ./$(APP); else \
	  echo "no display (DISPLAY is unset): running Nibble on a virtual one, asking the demo a question about its sample document and saving a screenshot"; \
	  $(MAKE) --no-print-directory run-deps && \
	  $(DEMO_ENV) SMOKE_EXPECT="$(DEMO_ANSWER)" build/linux/smoke.sh ./$(APP) ./$(XWD2PNG) $(CURDIR)/$(APP_SHOT) "$(DEMO_QUESTION)"; fi

# The CLI on the demo model.
run-cli: build $(DEMO)
	$(BIN) run -m $(DEMO) -p "Nibble keeps its KV cache in four bits because" -n 48 --temp 0.7 --seed 1

# ---- The app (Wails v2; WebKitGTK 4.1 on Linux). It needs cgo, so it has
# targets of its own; the rest of the tree builds and tests without cgo.
APP := bin/nibble-app
APP_TAGS := webkit2_41,production
APP_SHOT := bin/nibble-app.png
APP_SHOT_STOPPED := bin/nibble-app-stopped.png
XWD2PNG := bin/xwd2png
SHOTCHECK := bin/shotcheck
# The app in Wails' dev mode: besides its window it serves the frontend and
# a websocket bridge to its bindings, which the end-to-end test drives.
APP_DEV := bin/nibble-app-dev
APP_DEV_TAGS := dev,webkit2_41
WAILS := github.com/wailsapp/wails/v2/cmd/wails@v2.11.0
NPM_STAMP := frontend/node_modules/.package-lock.json
FRONTEND_SRC := $(shell find frontend/src -type f 2>/dev/null) frontend/index.html \
	frontend/vite.config.ts frontend/svelte.config.js frontend/tsconfig.json

# Debian packages the app build needs, installed when missing (as root),
# and Node.js >= 20.19, which Debian 12 does not package.
app-deps: deps
	@[ "$(UNAME)" = Darwin ] || { missing=; for p in libwebkit2gtk-4.1-dev pkg-config gcc libc6-dev; do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	[ -z "$$missing" ] || { echo "installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }; }
	@node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' 2>/dev/null || { \
	  echo "the frontend needs Node.js >= 20.19 and npm (https://nodejs.org; Debian 12's nodejs is too old)"; exit 1; }

# What `make run` needs without a display: a virtual X server and fonts.
run-deps:
	@missing=; for p in xvfb fonts-dejavu-core; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	[ -z "$$missing" ] || { echo "installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }

$(NPM_STAMP): frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

frontend/dist/index.html: $(NPM_STAMP) $(FRONTEND_SRC)
	cd frontend && npm run --silent build -- --logLevel warn

frontend: app-deps frontend/dist/index.html

# On a Mac, Nibble.app (build/bin/Nibble.app) with the Wails CLI: -s, the
# frontend is built already; -m -nosyncgomod, go.mod is left as it is.
ifeq ($(UNAME),Darwin)
app: frontend
	CGO_ENABLED=1 go run $(WAILS) build -platform darwin/arm64 -trimpath -s -m -nosyncgomod
	@echo "built build/bin/Nibble.app"
else
app: frontend
	CGO_ENABLED=1 go build -trimpath -tags $(APP_TAGS) -o $(APP) .
	go build -o $(XWD2PNG) ./app/desktop/xwd2png
	go build -o $(SHOTCHECK) ./app/desktop/e2e/cmd/shotcheck
endif

app-dev: frontend
	CGO_ENABLED=1 go build -trimpath -tags $(APP_DEV_TAGS) -o $(APP_DEV) .

# What the end-to-end test needs besides run-deps: Debian's Chromium, which
# playwright-core drives headless, the fonts it renders the UI with, and
# xwininfo (x11-utils), which tells whether the app's window is on screen.
e2e-deps: run-deps
	@missing=; for p in chromium fonts-liberation x11-utils; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	[ -z "$$missing" ] || { echo "installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }

# Regenerate frontend/src/lib/wailsjs (the typed bindings of desktop.App)
# after changing a bound method or its types.
bindings: frontend
	CGO_ENABLED=1 go run $(WAILS) generate module -tags webkit2_41

frontend-check: app-deps $(NPM_STAMP)
	cd frontend && npm run --silent check && npm run --silent lint

# The frontend's unit tests (vitest, no Go side).
frontend-test: app-deps $(NPM_STAMP)
	cd frontend && npm run --silent test

# The app end to end: the dev build under Xvfb, driven from headless
# Chromium through its real bindings (app/desktop/e2e); screenshots of each
# step land in bin/e2e.
app-e2e: app-dev e2e-deps
	NIBBLE_E2E_APP=$(CURDIR)/$(APP_DEV) NIBBLE_E2E_SHOTS=$(CURDIR)/bin/e2e \
	  go test -count=1 -v -timeout 8m -run '^TestAppE2E$$' ./app/desktop/e2e

# The production window under Xvfb (WebKitGTK) after a streamed reply, on a
# fresh NIBBLE_HOME; smoke.sh fails when the screenshot is blank.
app-shot: app run-deps
	@home=$$(mktemp -d); NIBBLE_HOME=$$home build/linux/smoke.sh ./$(APP) ./$(XWD2PNG) $(CURDIR)/$(APP_SHOT); \
	  rc=$$?; rm -rf $$home; exit $$rc

app-vet: frontend
	CGO_ENABLED=1 go vet -tags webkit2_41 ./app/desktop/... ./frontend .
	CGO_ENABLED=1 go test -race -count=1 ./app/desktop/...

# Everything about the app, end to end: type-check and lint the frontend,
# vet and race-test the Go side with cgo, build, and run it headless on the
# demo model until a reply has streamed (screenshot in $(APP_SHOT)), then
# again with Stop clicked mid-reply ($(APP_SHOT_STOPPED)).
app-check: frontend-check app-vet app run-deps
	build/linux/smoke.sh ./$(APP) ./$(XWD2PNG) $(CURDIR)/$(APP_SHOT)
	SMOKE_STOP_AFTER=40 build/linux/smoke.sh ./$(APP) ./$(XWD2PNG) $(CURDIR)/$(APP_SHOT_STOPPED)

# The Go tests first, then the frontend and the app end to end.
test: deps fmt-check vet cross-vet darwin-check lint go-test frontend-check frontend-test app-e2e app-shot

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }

vet:
	go vet ./...

# engine/ and metal/ must build for the Mac without cgo.
cross-vet:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./engine/... ./metal/...

# The Mac app without a Mac: its darwin files (darwinkit, Wails' Cocoa
# frontend, sqweek/dialog: all cgo, so go vet cannot) type-checked with
# go/types as `wails build` would compile them, import "C" faked; and the
# CLI, which needs no cgo, built for the Mac.
.PHONY: darwin-check
darwin-check:
	go run ./app/desktop/darwincheck
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./app/... .
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o /dev/null .
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o /dev/null ./metal/internal/cmd/metalcheck

lint:
	go run $(STATICCHECK) ./...

go-test:
	@[ -d $(TESTDATA) ] || echo "note: $(TESTDATA) is absent; tests that need it will skip"
	go test -count=1 -timeout 12m ./...
	# What several goroutines share, under the race detector: the engine
	# scheduler, the backend it drives, and the app's stores and downloads.
	CGO_ENABLED=1 go test -race -count=1 -timeout 10m ./engine/scheduler ./engine/cpu \
	  ./app/history ./app/download ./app/settings ./app/server ./app/desktop/service

# The local server against the official openai npm package (needs node and npm; part of go-test too).
.PHONY: serve-e2e
serve-e2e:
	go test -count=1 -v -run 'TestServe' ./app/cli

# Longer fuzzing runs (not part of make test): make fuzz FUZZTIME=5m
FUZZTIME ?= 60s
fuzz:
	go test ./engine/gguf -run '^$$' -fuzz FuzzReadHeader -fuzztime $(FUZZTIME) -parallel 2
	go test ./engine/tokenizer -run '^$$' -fuzz 'FuzzEncode$$' -fuzztime $(FUZZTIME) -parallel 2
	go test ./engine/tokenizer -run '^$$' -fuzz FuzzEncodeSpans -fuzztime $(FUZZTIME) -parallel 2
	go test ./engine -run '^$$' -fuzz FuzzEncodeChat -fuzztime $(FUZZTIME) -parallel 2
	go test ./engine/chat -run '^$$' -fuzz FuzzParseRender -fuzztime $(FUZZTIME) -parallel 2
	go test ./engine/sample -run '^$$' -fuzz FuzzSample -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/settings -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/history -run '^$$' -fuzz FuzzSearch -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/history -run '^$$' -fuzz FuzzMarkdownExport -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/remote -run '^$$' -fuzz FuzzStream -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/documents/extract/pdf -run '^$$' -fuzz FuzzExtractPDF -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/documents/extract -run '^$$' -fuzz FuzzExtractDOCX -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/documents/extract -run '^$$' -fuzz FuzzExtractHTML -fuzztime $(FUZZTIME) -parallel 2
	go test ./app/documents/retrieve -run '^$$' -fuzz FuzzChunk -fuzztime $(FUZZTIME) -parallel 2
	go test ./metal/internal/msltoc -run '^$$' -fuzz FuzzTranslate -fuzztime $(FUZZTIME) -parallel 2

clean:
	rm -rf bin
