#!/bin/sh
# Installs the Debian packages the tests drive for real (prometheus, promtool, alertmanager, chromium, openssl) when missing.
set -eu
missing=""
command -v prometheus >/dev/null 2>&1 || missing="$missing prometheus"
command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
command -v prometheus-alertmanager >/dev/null 2>&1 || missing="$missing prometheus-alertmanager"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=""
fi
echo "installing Debian packages:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $(echo "$missing" | tr ' ' '\n' | sort -u) >/dev/null
