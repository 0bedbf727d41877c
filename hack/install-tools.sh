#!/usr/bin/env bash
# Installs the test tools that come from Debian's packages when they are missing:
# promtool and prometheus (package prometheus), for test/monitoring and the e2e test that
# has a real Prometheus scrape the controller. Run by make tools (and so by make test).
set -o errexit -o nounset -o pipefail

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "promtool and prometheus are needed: sudo apt-get install prometheus" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends prometheus >/dev/null ||
  { apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; }
# The package starts no server here (no init system runs it); the tests start their own.
promtool --version | head -1
