#!/usr/bin/env bash
# Fast checks of the desktop integration files in resources/ (no build needed):
# desktop-file-validate, appstreamcli validate --no-net, the metainfo's newest release is the
# project's version, and the PNG icons have the sizes their folders say.
#   usage: check_metadata.sh SOURCE_DIR VERSION
set -euo pipefail
SRC=$1 VERSION=$2
R=$SRC/resources
ID=io.github.lathe.Lathe
fail() { echo "FAIL: $*" >&2; exit 1; }

for tool in desktop-file-validate appstreamcli file; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (packaging/setup.sh installs it)"; exit 77; }
done

out=$(desktop-file-validate "$R/$ID.desktop" 2>&1) || fail "desktop-file-validate: $out"
grep -v ": hint: " <<<"$out" | grep . && fail "desktop-file-validate warnings: $out"
grep -qx "Icon=$ID" "$R/$ID.desktop" || fail "the desktop file's Icon is not $ID"
grep -qx "Exec=lathe %f" "$R/$ID.desktop" || fail "the desktop file does not start lathe"

appstreamcli validate --no-net "$R/$ID.metainfo.xml" || fail "appstreamcli validate"
grep -q "<id>$ID</id>" "$R/$ID.metainfo.xml" || fail "metainfo id is not $ID"
grep -q "<launchable type=\"desktop-id\">$ID.desktop</launchable>" "$R/$ID.metainfo.xml" \
  || fail "metainfo does not launch $ID.desktop"
newest=$(grep -o '<release version="[^"]*"' "$R/$ID.metainfo.xml" | head -1 | cut -d'"' -f2)
[ "$newest" = "$VERSION" ] || fail "metainfo's newest release is $newest, the project is $VERSION: add a <release>"

svg=$R/icons/hicolor/scalable/apps/$ID.svg
file "$svg" | grep -q "SVG" || fail "$svg is not an SVG"
for s in 16 22 24 32 48 64 128 256; do
  png=$R/icons/hicolor/${s}x${s}/apps/$ID.png
  file "$png" | grep -q "PNG image data, $s x $s," || fail "$png is not a ${s}x${s} PNG"
done
echo "desktop file, AppStream metadata and icons OK"
