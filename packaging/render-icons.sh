#!/usr/bin/env bash
# Renders the committed PNG icons from the scalable one,
# resources/icons/hicolor/scalable/apps/io.github.lathe.Lathe.svg. Run by hand after editing the
# SVG (needs rsvg-convert: apt-get install librsvg2-bin); the build only installs the files.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../resources/icons/hicolor"
for s in 16 22 24 32 48 64 128 256; do
  mkdir -p "${s}x${s}/apps"
  rsvg-convert -w "$s" -h "$s" scalable/apps/io.github.lathe.Lathe.svg -o "${s}x${s}/apps/io.github.lathe.Lathe.png"
done
