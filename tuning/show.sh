#!/usr/bin/env bash
# Shows the host settings that matter for tens of thousands of client connections.
set -u
show() { printf '%-40s %s\n' "$1" "$(cat "$2" 2>/dev/null || echo '(not readable)')"; }
printf '%-40s %s\n' "open files (soft limit, this shell)" "$(ulimit -Sn)"
printf '%-40s %s\n' "open files (hard limit, this shell)" "$(ulimit -Hn)"
show "fs.nr_open" /proc/sys/fs/nr_open
show "fs.file-max" /proc/sys/fs/file-max
show "net.ipv4.ip_local_port_range" /proc/sys/net/ipv4/ip_local_port_range
show "net.ipv4.tcp_tw_reuse" /proc/sys/net/ipv4/tcp_tw_reuse
show "net.core.somaxconn" /proc/sys/net/core/somaxconn
show "net.ipv4.tcp_max_syn_backlog" /proc/sys/net/ipv4/tcp_max_syn_backlog
show "net.core.netdev_max_backlog" /proc/sys/net/core/netdev_max_backlog
show "kernel.io_uring_disabled" /proc/sys/kernel/io_uring_disabled
printf '%-40s %s\n' "CPUs" "$(nproc)"
printf '%-40s %s\n' "CPU frequency governor" "$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo '(none)')"
