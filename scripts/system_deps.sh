#!/usr/bin/env bash
# System (apt) packages some packages use: tesseract-ocr (eva-agent's Tesseract OCR tool).
# Installs what is missing when apt-get and root (or sudo) are there; otherwise says what to
# install and carries on: the code paths that need a missing one skip or report it cleanly.
set -uo pipefail
missing=()
command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo -n"
if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
    echo "installing system packages: ${missing[*]}"
    if $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
        || { $sudo apt-get update -qq >/dev/null 2>&1 \
             && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; }; then
        exit 0
    fi
fi
echo "note: could not install ${missing[*]} (install them with your package manager);" \
     "the tests and tools that need them skip" >&2
exit 0
