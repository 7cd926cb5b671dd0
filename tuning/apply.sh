#!/usr/bin/env bash
# Applies host settings for 10,000+ concurrent streams (run as root; they last until reboot).
# Each line says what it changes and why; see tuning/README.md.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    echo "run as root: these are system-wide kernel settings" >&2
    exit 1
fi
set_sysctl() {
    local key=$1 value=$2 why=$3
    if sysctl -w "$key=$value" >/dev/null 2>&1; then
        printf 'set %-32s = %-14s (%s)\n' "$key" "$value" "$why"
    else
        printf 'could not set %s (read-only here?)\n' "$key" >&2
    fi
}
set_sysctl fs.nr_open 1048576 "per-process open-files ceiling"
set_sysctl fs.file-max 2097152 "system-wide open files"
set_sysctl net.ipv4.ip_local_port_range "1024 65535" "more client ports per server address"
set_sysctl net.ipv4.tcp_tw_reuse 1 "reuse TIME_WAIT ports for new outgoing connections"
set_sysctl net.core.somaxconn 65535 "accept backlog (the simulator's listen queue)"
set_sysctl net.ipv4.tcp_max_syn_backlog 65535 "pending connections during ramp-up"
set_sysctl net.core.netdev_max_backlog 65535 "packets queued on loopback under bursts"
cat <<'MSG'
The open-files limit is per process: ringperf raises its soft limit to the hard limit itself.
To raise the hard limit, add to /etc/security/limits.conf (then log in again):
    *  soft  nofile  1048576
    *  hard  nofile  1048576
or start ringperf from a shell that ran `ulimit -Hn 1048576` as root.
MSG
