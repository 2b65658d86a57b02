#!/bin/sh
# Installs a baton executable from a release: picks the file for this OS and
# CPU, checks it against the release's SHA256SUMS, and puts it on the PATH.
#
#   curl -fsSL https://github.com/OWNER/REPO/releases/latest/download/install.sh | sh
#   sh install.sh [--role runner|relay|all] [--version vX.Y.Z] [--dir DIR]
#
# Environment: BATON_DOWNLOAD_URL (a folder holding a release's files: a
# mirror, or one served on an offline network), BATON_REPO (owner/repo on
# GitHub; the release's copy of this script has it written in),
# BATON_VERSION, BATON_INSTALL_DIR. See docs/install.md.
set -eu

REPO="${BATON_REPO:-__BATON_REPO__}"
VERSION="${BATON_VERSION:-latest}"
ROLE="runner"
DIR="${BATON_INSTALL_DIR:-${HOME:-}/.local/bin}"

fail() {
  echo "install.sh: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    --role) [ $# -ge 2 ] || fail "--role needs a value"; ROLE="$2"; shift 2 ;;
    --version) [ $# -ge 2 ] || fail "--version needs a value"; VERSION="$2"; shift 2 ;;
    --dir) [ $# -ge 2 ] || fail "--dir needs a value"; DIR="$2"; shift 2 ;;
    -h | --help)
      sed -n '2,12p' "$0" 2>/dev/null | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) fail "unknown option: '$1' (see --help)" ;;
  esac
done

case "$ROLE" in
  runner) NAME="baton-runner" ;;
  relay) NAME="baton-relay" ;;
  all) NAME="baton" ;;
  *) fail "unknown role: '$ROLE' (runner, relay or all)" ;;
esac

case "$(uname -s)" in
  Linux) OS="unknown-linux-gnu" ;;
  Darwin) OS="apple-darwin" ;;
  *) fail "no release for $(uname -s): use install.ps1 on Windows, or run from source (README)" ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) ARCH="x86_64" ;;
  aarch64 | arm64) ARCH="aarch64" ;;
  *) fail "no release for the CPU $(uname -m): run from source (README)" ;;
esac
# A Mac on Apple silicon running this shell under Rosetta still gets the native file.
if [ "$OS" = "apple-darwin" ] && [ "$ARCH" = "x86_64" ] &&
  [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || echo 0)" = "1" ]; then
  ARCH="aarch64"
fi
FILE="$NAME-$ARCH-$OS"

if [ -n "${BATON_DOWNLOAD_URL:-}" ]; then
  BASE="${BATON_DOWNLOAD_URL%/}"
else
  case "$REPO" in
    __BATON_REPO__ | "") fail "set BATON_REPO=owner/repo or BATON_DOWNLOAD_URL (this copy of the script names no release)" ;;
  esac
  if [ "$VERSION" = "latest" ]; then
    BASE="https://github.com/$REPO/releases/latest/download"
  else
    BASE="https://github.com/$REPO/releases/download/$VERSION"
  fi
fi

fetch() { # url file
  if command -v curl >/dev/null 2>&1; then
    curl -fsL --retry 2 -o "$2" "$1" || fail "could not download $1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$2" "$1" || fail "could not download $1"
  else
    fail "neither curl nor wget is installed"
  fi
}

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    fail "neither sha256sum nor shasum is installed: cannot check the download"
  fi
}

TMP="$(mktemp -d 2>/dev/null || mktemp -d -t baton)"
trap 'rm -rf "$TMP"' EXIT INT TERM

echo "Downloading $FILE from $BASE"
fetch "$BASE/SHA256SUMS" "$TMP/SHA256SUMS"
fetch "$BASE/$FILE" "$TMP/$FILE"

EXPECTED="$(awk -v f="$FILE" '$2 == f || $2 == "*" f { print $1; exit }' "$TMP/SHA256SUMS")"
[ -n "$EXPECTED" ] || fail "$FILE is not listed in SHA256SUMS: nothing installed"
ACTUAL="$(sha256 "$TMP/$FILE")"
if [ "$EXPECTED" != "$ACTUAL" ]; then
  fail "checksum mismatch for $FILE (expected $EXPECTED, got $ACTUAL): nothing installed"
fi

mkdir -p "$DIR" || fail "cannot create $DIR"
chmod 755 "$TMP/$FILE"
mv -f "$TMP/$FILE" "$DIR/$NAME" || fail "cannot write $DIR/$NAME"
echo "Installed $DIR/$NAME (sha256 $ACTUAL)"

case ":${PATH:-}:" in
  *":$DIR:"*) ;;
  *) echo "Note: $DIR is not on your PATH; add it, e.g. echo 'export PATH=\"$DIR:\$PATH\"' >> ~/.profile" ;;
esac
case "$ROLE" in
  runner) echo "Next: $NAME setup, then $NAME install (a service that starts at login)" ;;
  relay) echo "Next: $NAME --help, or $NAME install (a service)" ;;
  all) echo "Next: $NAME up" ;;
esac
