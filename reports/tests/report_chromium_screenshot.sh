#!/usr/bin/env bash
# Renders the sample HTML report (3 collectives, 4 runs) with headless Chromium
# and checks that the screenshot is not blank: enough non-white pixels, and
# saturated ones (the chart lines). Exit 77 (skipped) without Chromium.
# usage: report_chromium_screenshot.sh PATH/TO/reports_report_tests
set -euo pipefail

tests_bin=${1:?usage: $0 PATH/TO/reports_report_tests}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $browser ]]; then
  echo "SKIP: no chromium / chromium-browser on PATH (Debian package: chromium)"
  exit 77
fi
if ! command -v python3 >/dev/null; then
  echo "SKIP: python3 is needed to decode the screenshot"
  exit 77
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$tests_bin" --write-sample "$dir/report.html"
# --no-sandbox: CI runs as root; the page has no script and loads nothing.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
  --user-data-dir="$dir/profile" --window-size=1200,2000 \
  --screenshot="$dir/shot.png" "file://$dir/report.html" >"$dir/chromium.log" 2>&1 || {
  echo "FAIL: chromium exited with status $?:"
  tail -n 20 "$dir/chromium.log"
  exit 1
}
if [[ ! -s $dir/shot.png ]]; then
  echo "FAIL: chromium wrote no screenshot"
  tail -n 20 "$dir/chromium.log"
  exit 1
fi

python3 - "$dir/shot.png" <<'PY'
import struct, sys, zlib

def decode_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("FAIL: not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, ctype, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace:
        sys.exit(f"FAIL: unsupported PNG (depth {depth}, color type {ctype}, interlace {interlace})")
    raw, bpp, stride = zlib.decompress(idat), channels, width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1: line[i] = (line[i] + a) & 0xFF
            elif ftype == 2: line[i] = (line[i] + b) & 0xFF
            elif ftype == 3: line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows

width, height, channels, rows = decode_png(sys.argv[1])
dark = colored = 0
colors = set()
for row in rows:
    for x in range(0, width * channels, channels * 2):  # every other pixel is enough
        px = row[x:x + min(channels, 3)] if channels >= 3 else row[x:x + 1] * 3
        colors.add(bytes(px))
        if min(px) < 200: dark += 1
        if max(px) - min(px) > 80: colored += 1
sampled = width * height // 2
print(f"screenshot {width}x{height}: {dark} dark and {colored} colored of {sampled} sampled pixels, "
      f"{len(colors)} distinct colors")
if dark < sampled // 200 or colored < 200 or len(colors) < 8:
    sys.exit("FAIL: the screenshot looks blank (no text or no chart lines)")
print("PASS")
PY
