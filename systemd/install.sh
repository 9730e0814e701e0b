#!/usr/bin/env bash
# Installs Outpost from this checkout as a systemd service (run as root on the gateway).
# Needs Node.js >= 20 (on a Raspberry Pi: Node 22 or 24 on 64-bit Raspberry Pi OS).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
prefix=/opt/outpost

node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { echo "Node.js >= 20 is required" >&2; exit 1; }
id outpost >/dev/null 2>&1 || useradd --system --home /var/lib/outpost --shell /usr/sbin/nologin outpost

mkdir -p "$prefix" /etc/outpost
cp -r "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$src/tsconfig.build.json" "$src/src" "$src/config" "$src/abcl" "$src/systemd" "$prefix/"
cd "$prefix"
npm ci --no-audit --no-fund
npm run build
npm prune --omit=dev --no-audit --no-fund
[ -f /etc/outpost/config.json ] || echo '{ "version": 1 }' > /etc/outpost/config.json
install -m 0644 "$prefix/systemd/outpost.service" /etc/systemd/system/outpost.service
systemctl daemon-reload
systemctl enable --now outpost
echo "Outpost installed; logs: journalctl -u outpost -f"
