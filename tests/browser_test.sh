#!/usr/bin/env bash
# Opens real reports in headless Chromium: every chart rendered (the page's own check compares
# each chart's marks with its data-marks attribute and its on-screen size), no script or
# console error, nothing fetched from the network, and a verdict banner above the charts that
# says the right thing: PASS for a report of correct kernels only, FAIL with the mutant's
# findings for a report of a mutant. Saves a screenshot into the build tree.
# Skips (exit 77) with the reason where Chromium is not installed.
#
# usage: browser_test.sh KVFUZZ SOURCE_DIR OUT_DIR
set -u
kvfuzz=$1
src=$2
out=$3

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
  echo "SKIP: no chromium on PATH (Debian: apt-get install chromium, or KVF_WITH_BROWSER=1 scripts/setup.sh)"
  exit 77
fi

rm -rf "$out"
mkdir -p "$out/findings"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Real statistics from the seed corpus: two correct kernels in one file, a mutant in another.
"$kvfuzz" replay --kernel cpu-ref --kernel cpu-splitkv --rule strict --rule fib \
  --stats "$out/cpu.json" "$src/corpus/seeds" >"$out/replay-cpu.txt" 2>&1
"$kvfuzz" replay --kernel cpu-splitkv/mut=trunc-store --rule strict --rule fib \
  --stats "$out/mutant.json" "$src/corpus/seeds" >"$out/replay-mutant.txt" 2>&1
# One finding, shaped as the campaign writes them, so the findings table has a link.
cp "$src/corpus/seeds/00-seed-h20kv4.kvfz" "$out/findings/o-tolerance-00000000c0ffee00.kvfz"
echo '{"class": "o-tolerance", "kernel": "cpu-splitkv/mut=trunc-store", "rule": "strict"}' \
  >"$out/findings/o-tolerance-00000000c0ffee00.json"
if ! "$kvfuzz" report --quiet -o "$out/report" --findings "$out/findings" \
  cpu="$out/cpu.json" mutant="$out/mutant.json" >"$out/report.txt" 2>&1; then
  echo "FAIL: kvfuzz report failed: $(cat "$out/report.txt")"
  exit 1
fi
page="$(cd "$out/report" && pwd)/index.html" # file:// needs an absolute path

# Flags: a fresh profile, no background traffic; an unreachable proxy turns any network
# request the page might make into a logged failure.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --proxy-server=127.0.0.1:9 --user-data-dir="$profile"
       --enable-logging=stderr --v=0)

# 1. The DOM after the page's scripts ran: #kvf-status says whether every chart rendered.
timeout 120 "$browser" "${flags[@]}" --window-size=1280,1000 --dump-dom "file://$page" \
  >"$out/dom.html" 2>"$out/chromium-dom.log"
rc=$?
[ "$rc" -eq 0 ] || fail "chromium --dump-dom exited $rc (log: $out/chromium-dom.log)"
status=$(grep -o '<p id="kvf-status"[^>]*>[^<]*' "$out/dom.html" | head -1)
echo "page status: ${status#*>}"
case "$status" in
  *'data-state="ok"'*) ;;
  *) fail "the page's self-check did not pass: ${status:-no #kvf-status element in the DOM}" ;;
esac
want=$(grep -c '<svg class="chart"' "$page")
got=$(grep -o 'OK charts=[0-9]*' <<<"$status" | grep -o '[0-9]*$')
[ "${got:-0}" = "$want" ] || fail "the page checked ${got:-0} charts, the file has $want"
if grep -q '<li>' <(sed -n '/id="kvf-errors"/,/<\/ul>/p' "$out/dom.html"); then
  fail "script errors recorded in the page: $(sed -n '/id="kvf-errors"/,/<\/ul>/p' "$out/dom.html")"
fi
# Chromium logs every console message (errors, failed loads) as INFO:CONSOLE; the page logs
# nothing on success, so any such line is a failure.
if grep -q 'CONSOLE' "$out/chromium-dom.log"; then
  fail "console output: $(grep 'CONSOLE' "$out/chromium-dom.log" | head -5)"
fi

# 2. The verdict banner, rendered: a report of the correct kernels alone passes and says
# "passes"; a report of the mutant alone fails and says "FAILS". The page's own check puts the
# banner's data-verdict into its status only when the banner is visible above the charts.
verdict_of() { # REPORT_DIR NAME: prints the rendered status line and keeps the DOM
  local p
  p="$(cd "$1" && pwd)/index.html"
  timeout 120 "$browser" "${flags[@]}" --window-size=1280,1000 --dump-dom "file://$p" \
    >"$out/dom-$2.html" 2>"$out/chromium-$2.log" || fail "chromium --dump-dom of $2 failed"
  grep -o '<p id="kvf-status"[^>]*>[^<]*' "$out/dom-$2.html" | head -1
}
"$kvfuzz" report --quiet -o "$out/report-pass" "$out/cpu.json" >/dev/null 2>&1 || fail "report of cpu.json failed"
"$kvfuzz" report --quiet -o "$out/report-fail" --findings "$out/findings" "$out/mutant.json" \
  >/dev/null 2>&1 || fail "report of mutant.json failed"
st=$(verdict_of "$out/report-pass" pass)
case "$st" in *'data-state="ok"'*'verdict=pass'*) ;; *) fail "correct kernels: status '$st'" ;; esac
banner=$(sed -n '/id="kvf-verdict"/,/<\/section>/p' "$out/dom-pass.html")
grep -q 'Verdict: PASS' <<<"$banner" || fail "correct kernels: the banner does not say PASS"
# Every seed but the one whose logits pass the f32 range (out of the model, counted apart).
in_model=$(($(ls "$src"/corpus/seeds/*.kvfz | wc -l) - 1))
grep -q "cpu-ref</b> under <b>strict</b>: passes $in_model cases" <<<"$banner" || fail "correct kernels: no 'passes' line for cpu-ref under strict"
grep -q 'FAILS' <<<"$banner" && fail "correct kernels: the banner says FAILS"
st=$(verdict_of "$out/report-fail" fail)
case "$st" in *'data-state="ok"'*'verdict=fail'*) ;; *) fail "mutant: status '$st'" ;; esac
banner=$(sed -n '/id="kvf-verdict"/,/<\/section>/p' "$out/dom-fail.html")
grep -q 'Verdict: FAIL' <<<"$banner" || fail "mutant: the banner does not say FAIL"
# A replay records no findings directory, so its failures are named by class.
grep -q 'trunc-store</b> under <b>strict</b>: FAILS: [0-9]* findings in 1 class: [0-9]* o-tolerance' <<<"$banner" || fail "mutant: no 'FAILS ... o-tolerance' line under strict"

# 3. A screenshot of the whole page for people (and CI artifacts).
timeout 120 "$browser" "${flags[@]}" --hide-scrollbars --window-size=1100,7200 \
  --screenshot="$out/report.png" "file://$page" >/dev/null 2>"$out/chromium-shot.log"
rc=$?
[ "$rc" -eq 0 ] || fail "chromium --screenshot exited $rc (log: $out/chromium-shot.log)"
if [ "$(head -c 8 "$out/report.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
  fail "no PNG screenshot at $out/report.png"
else
  echo "screenshot: $out/report.png ($(wc -c <"$out/report.png") bytes)"
fi
if grep -q 'CONSOLE' "$out/chromium-shot.log"; then
  fail "console output while taking the screenshot: $(grep 'CONSOLE' "$out/chromium-shot.log" | head -5)"
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "browser: the report renders all $want charts without errors"
