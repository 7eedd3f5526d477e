#!/bin/sh
# Install Debian's chromium for the headless browser test (tests/test_report_browser.py).
#
# Does nothing when /usr/bin/chromium is already there. Needs root (or passwordless sudo) and
# apt; exits non-zero with a message on stderr when it cannot install, so the test can skip
# with that reason.
set -eu

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
    echo "chromium already installed: $CHROMIUM"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "cannot install chromium: apt-get not found (not a Debian/Ubuntu system)" >&2
    exit 2
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "cannot install chromium: not root and no passwordless sudo" >&2
    exit 3
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when chromium is not known yet (a fresh container has none).
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get -o DPkg::Lock::Timeout=180 update -q || { echo "cannot install chromium: apt-get update failed" >&2; exit 4; }
fi
if ! $SUDO apt-get -o DPkg::Lock::Timeout=180 install -y -q --no-install-recommends chromium; then
    # A stale package list (a version that was removed from the mirror) fails the download.
    $SUDO apt-get -o DPkg::Lock::Timeout=180 update -q && $SUDO apt-get -o DPkg::Lock::Timeout=180 install -y -q --no-install-recommends chromium \
        || { echo "cannot install chromium: apt-get install chromium failed" >&2; exit 5; }
fi
[ -x "$CHROMIUM" ] || { echo "cannot install chromium: $CHROMIUM missing after install" >&2; exit 6; }
echo "installed $("$CHROMIUM" --version 2>/dev/null || echo chromium)"
