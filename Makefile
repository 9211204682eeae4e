# Nibble build. `make run` and `make test` work on a fresh Debian 12 machine
# as root: `make deps` installs what they need first.
SHELL := /bin/bash
GO_VERSION := 1.26.8
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
# An older system Go fetches the pinned toolchain through the module proxy.
export GOTOOLCHAIN := go$(GO_VERSION)
export CGO_ENABLED := 0

BIN := bin/nibble
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nibble
DEMO := $(CACHE)/demo-llama-q8_0.gguf
TESTDATA := ../shared/testdata
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.7.0

.PHONY: all deps build run test vet lint fmt-check cross-vet go-test fuzz clean

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

build: deps
	go build -trimpath -o $(BIN) .

# The demo model has random weights (nothing is downloaded): it shows the
# engine streaming, not sensible text.
$(DEMO): | build
	@mkdir -p $(CACHE)
	$(BIN) synth --arch llama --layers 4 --embd 512 --heads 8 --kv-heads 2 --ff 1536 \
	  --type q8_0 --seed 7 -o $(DEMO)

run: build $(DEMO)
	$(BIN) run -m $(DEMO) -p "Nibble keeps its KV cache in four bits because" -n 48 --temp 0.7 --seed 1

test: deps fmt-check vet cross-vet lint go-test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }

vet:
	go vet ./...

# engine/ and metal/ must build for the Mac without cgo.
cross-vet:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./engine/... $(wildcard ./metal/...)

lint:
	go run $(STATICCHECK) ./...

go-test:
	@[ -d $(TESTDATA) ] || echo "note: $(TESTDATA) is absent; tests that need it will skip"
	go test -count=1 -timeout 12m ./...
	# What several goroutines share, under the race detector: the engine
	# scheduler, the backend it drives, and the app's stores and downloads.
	CGO_ENABLED=1 go test -race -count=1 -timeout 5m ./engine/scheduler ./engine/cpu ./app/history ./app/download ./app/settings

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

clean:
	rm -rf bin
