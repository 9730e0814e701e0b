#!/usr/bin/env bash
# Installs (or upgrades, or removes) Outpost as a systemd service from a built checkout.
# docs/operations.md walks through it. Run as root on the gateway:
#
#   npm ci && npm run build          # in the checkout, once: builds dist/ and the native modules
#   sudo systemd/install.sh          # copies the release to /opt/outpost, enables and starts the unit
#   sudo systemd/install.sh --uninstall [--purge]
#
# Options:
#   --root DIR     install under DIR instead of / (a scratch root: no user, no chown, no systemctl)
#   --no-start     install and enable, but do not start or restart the service
#   --uninstall    stop and remove the service and /opt/outpost; keeps /etc/outpost and /var/lib/outpost
#   --purge        with --uninstall: also delete the configuration, the data and the outpost user
#
# The configuration file is written from config/example.jsonc only when none exists: an existing
# /etc/outpost/config.json is never overwritten, also not on upgrades.
# (end of --help)
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
root=/
start=yes
action=install
purge=no
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:?--root needs a directory}"; shift 2 ;;
    --root=*) root="${1#--root=}"; shift ;;
    --no-start) start=no; shift ;;
    --uninstall) action=uninstall; shift ;;
    --purge) purge=yes; shift ;;
    # Prints the comment block above, up to its end marker (not the shell code after it).
    -h|--help) sed -n '2,/^# (end of --help)/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$purge" = yes ] && [ "$action" != uninstall ]; then
  echo "install.sh: --purge only goes with --uninstall" >&2
  exit 2
fi

root="$(cd "$root" && pwd)"
# On the real root this script manages the user, ownership and systemd; under a scratch root it only lays out files.
if [ "$root" = / ]; then real=yes; r=""; else real=no; r="$root"; fi
prefix="$r/opt/outpost"
unit="$r/etc/systemd/system/outpost.service"
confdir="$r/etc/outpost"
datadir="$r/var/lib/outpost"

say() { echo "outpost install: $*"; }
have_systemd() { [ "$real" = yes ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; }

if [ "$real" = yes ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (or use --root DIR for a scratch install)" >&2
  exit 1
fi

if [ "$action" = uninstall ]; then
  if have_systemd; then
    systemctl disable --now outpost.service 2>/dev/null || true
  fi
  rm -f "$unit"
  rm -rf "$prefix" "$prefix.previous" "$prefix.new"
  have_systemd && systemctl daemon-reload
  if [ "$purge" = yes ]; then
    rm -rf "$confdir" "$datadir"
    if [ "$real" = yes ] && id outpost >/dev/null 2>&1; then userdel outpost || true; fi
    say "removed the service, the program, the configuration ($confdir) and the data ($datadir)"
  else
    say "removed the service and the program; kept the configuration ($confdir) and the data ($datadir)"
    say "to delete them too: install.sh --uninstall --purge"
  fi
  exit 0
fi

# --- install or upgrade ---
node_bin="$(command -v node || true)"
[ -n "$node_bin" ] || { echo "install.sh: Node.js >= 20 is required (none found on PATH)" >&2; exit 1; }
"$node_bin" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || { echo "install.sh: Node.js >= 20 is required, found $("$node_bin" --version)" >&2; exit 1; }
for need in dist/cli/main.js node_modules/better-sqlite3 config/example.jsonc systemd/outpost.service src/console/static/index.html abcl; do
  [ -e "$src/$need" ] || { echo "install.sh: $src/$need is missing: run 'npm ci && npm run build' in $src first" >&2; exit 1; }
done

if [ "$real" = yes ] && ! id outpost >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/outpost --no-create-home --shell /usr/sbin/nologin outpost
  say "created system user outpost"
fi

# The release is assembled beside the old one and swapped in, so a failed copy leaves the old one working.
mkdir -p "$r/opt"
rm -rf "$prefix.new"
mkdir -m 0755 "$prefix.new"
cp -a "$src/package.json" "$src/package-lock.json" "$src/README.md" "$src/dist" "$src/config" "$src/abcl" "$src/systemd" "$src/docs" "$src/node_modules" "$prefix.new/"
# What the daemon reads at run time besides dist/ and node_modules/ (package.json "files" lists the
# same): the console's files, served from src/console/static/ (no TypeScript sources are copied),
# the shipped codec documents in abcl/, and package.json for the version. `outpost doctor` checks them.
mkdir -p "$prefix.new/src/console"
cp -a "$src/src/console/static" "$prefix.new/src/console/"
# Development packages (TypeScript, tsx, test clients) are not needed to run; --offline: nothing is downloaded.
if command -v npm >/dev/null 2>&1; then
  (cd "$prefix.new" && npm prune --omit=dev --offline --no-audit --no-fund --ignore-scripts >/dev/null)
fi
chmod -R u=rwX,go=rX "$prefix.new"
if [ -e "$prefix" ]; then
  rm -rf "$prefix.previous"
  mv "$prefix" "$prefix.previous"
fi
mv "$prefix.new" "$prefix"
say "installed $(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$prefix/package.json" | head -1) in $prefix"

# The unit runs the node found now (nodesource: /usr/bin/node; nvm or a tarball: elsewhere).
mkdir -p "$(dirname "$unit")"
sed "s#^ExecStart=/usr/bin/node #ExecStart=$node_bin #" "$prefix/systemd/outpost.service" > "$unit.tmp"
chmod 0644 "$unit.tmp"
mv "$unit.tmp" "$unit"

mkdir -p "$confdir"
chmod 0750 "$confdir"
if [ -e "$confdir/config.json" ]; then
  say "kept the existing $confdir/config.json"
else
  # 0640: the file may hold the upstream token; the service reads it through its group.
  install -m 0640 "$prefix/config/example.jsonc" "$confdir/config.json"
  say "wrote $confdir/config.json from the documented example (edit it, then: systemctl reload outpost)"
fi

mkdir -p "$datadir"
chmod 0700 "$datadir"
if [ "$real" = yes ]; then
  chown root:outpost "$confdir" "$confdir/config.json"
  chown outpost:outpost "$datadir"
fi

if have_systemd; then
  systemctl daemon-reload
  systemctl enable outpost.service >/dev/null
  if [ "$start" = yes ]; then
    # An upgrade restarts the running service onto the new release.
    systemctl restart outpost.service
    say "started; logs: journalctl -u outpost -f; health: outpost doctor"
  else
    say "enabled (not started): systemctl start outpost"
  fi
else
  say "no systemd here (scratch root or container): not creating users, not enabling the unit"
fi
