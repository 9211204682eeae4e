#!/usr/bin/env bash
# smoke.sh APP XWD2PNG OUT.png [PROMPT]
#
# Runs the app on a virtual X display (Xvfb), has the frontend send PROMPT
# once the model is ready (NIBBLE_AUTOTEST_PROMPT: typed into the prompt box
# and sent as a user would), waits until the reply has finished streaming,
# and saves a screenshot of the window as OUT.png. Exits non-zero, with the
# app's output, when the app dies, no reply ends in time, or the screenshot
# is blank (checked by shotcheck, next to XWD2PNG unless SHOTCHECK names it).
#
# SMOKE_STOP_AFTER=N: the frontend clicks Stop after N streamed pieces, and
# the reply must end cancelled. SMOKE_EXPECT=TEXT: the reply must contain
# TEXT. The app's other NIBBLE_* variables (NIBBLE_START_MODEL,
# NIBBLE_START_DOCUMENT) pass through.
set -euo pipefail

app=$1 xwd2png=$2 out=$3
prompt=${4:-"Nibble keeps its KV cache in four bits because"}
timeout_s=${SMOKE_TIMEOUT:-240} # a first run synthesizes the demo model first
stop_after=${SMOKE_STOP_AFTER:-0}
expect=${SMOKE_EXPECT:-}
shotcheck=${SHOTCHECK:-$(dirname "$xwd2png")/shotcheck}
[ -x "$shotcheck" ] || { echo "smoke: $shotcheck is missing (go build -o $shotcheck ./app/desktop/e2e/cmd/shotcheck)" >&2; exit 1; }

tmp=$(mktemp -d)
xpid= apid=
cleanup() {
  [ -z "$apid" ] || kill "$apid" 2>/dev/null || true
  [ -z "$xpid" ] || kill "$xpid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# A free display number.
n=99
while [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ]; do n=$((n + 1)); done
# -fbdir keeps the screen in an XWD file we can read at any time; -br
# makes the root black, which xwd2png -trim cuts away around the window.
Xvfb ":$n" -screen 0 640x800x24 -br -nolisten tcp -fbdir "$tmp" >"$tmp/xvfb.log" 2>&1 &
xpid=$!
for _ in $(seq 50); do [ -e "$tmp/Xvfb_screen0" ] && break; sleep 0.1; done
[ -e "$tmp/Xvfb_screen0" ] || { echo "smoke: Xvfb did not start:" >&2; cat "$tmp/xvfb.log" >&2; exit 1; }

: >"$tmp/app.out" # before the app starts writing it, for the first grep
DISPLAY=":$n" NIBBLE_AUTOTEST_PROMPT="$prompt" NIBBLE_AUTOTEST_STOP_AFTER="$stop_after" "$app" >"$tmp/app.out" 2>"$tmp/app.err" &
apid=$!
start=$SECONDS
until grep -q '^autotest: reply' "$tmp/app.out"; do
  if ! kill -0 "$apid" 2>/dev/null; then
    echo "smoke: the app exited before a reply ended:" >&2
    cat "$tmp/app.out" "$tmp/app.err" >&2
    exit 1
  fi
  if ((SECONDS - start > timeout_s)); then
    echo "smoke: no reply ended within ${timeout_s}s:" >&2
    cat "$tmp/app.out" "$tmp/app.err" >&2
    exit 1
  fi
  sleep 0.5
done
line=$(grep -m1 '^autotest: reply' "$tmp/app.out" | sed 's/^autotest: //')
if [ "$stop_after" -gt 0 ] && [[ $line != *"(cancelled)"* ]]; then
  echo "smoke: Stop was clicked after $stop_after pieces, but: $line" >&2
  exit 1
fi
if [ -n "$expect" ] && [[ $line != *"$expect"* ]]; then
  echo "smoke: the reply should contain \"$expect\", but: $line" >&2
  exit 1
fi
# Let the last frame (the reply's stats) paint; on a busy machine WebKit
# can take a few seconds more, so a blank frame is taken again.
for try in 1 2 3 4 5; do
  sleep 1
  "$xwd2png" -trim "$tmp/Xvfb_screen0" "$out"
  if "$shotcheck" "$out" 2>"$tmp/shotcheck.err"; then break; fi
  if [ "$try" = 5 ]; then
    cat "$tmp/shotcheck.err" "$tmp/app.out" "$tmp/app.err" >&2
    exit 1
  fi
done
echo "screenshot: $out ($line)"
