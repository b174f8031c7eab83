# Sourced by bench/run-imap.sh and bench/run-imap-idle-compress.sh: the "tuned Dovecot" lines
# appended to the dovecot.conf that shared/bench/setup-peers.sh generates, so that the peer runs
# as a large Dovecot 2.3 site would run it, not on its small-site defaults.
#
#   dovecot_tuning CONNS     print the lines for at most CONNS client connections at once
#
# What is set, and why (Dovecot 2.3 documentation: admin_manual/login_processes "High-performance
# mode", the wiki's PerformanceTuning, configuration_manual/hibernation, service_configuration):
# - service imap-login { service_count = 0; process_min_avail = 2; client_limit = CONNS+1000;
#   vsz_limit = 1G }: the "high-performance mode": a few long-running login processes (one per
#   core: this machine has 2) each handling many connections, instead of a new process per
#   connection (the default, "high-security mode", service_count = 1).
# - service imap { service_count = 100; process_limit = CONNS+200 }: imap process reuse; 2.3's
#   PerformanceTuning: "increase service_count from 1 to higher (e.g. 100) for imap ... not too
#   high or unlimited (0)". client_limit stays 1 (the only value 2.3 recommends for mail
#   processes). process_limit (default 1024) raised so the limit is never what a bench measures.
# - imap_hibernate_timeout = DOVECOT_HIBERNATE (default 5s, the documented example; 0 = off):
#   a session that has been in IDLE that long is moved to the shared imap-hibernate process and
#   its imap process is freed; with service imap { unix_listener imap-master { user =
#   $default_internal_user } } (so imap-hibernate can hand a session back, as the hibernation
#   page says) and service imap-hibernate { client_limit = min(CONNS+1000, 4000); vsz_limit =
#   1G }: each hibernated session holds its socket and its mailbox's notify (inotify) fd in the
#   imap-hibernate process, and the machine's hard `ulimit -n` is 20,000, so 4,000 per process
#   (more are started as needed, up to default_process_limit, 100).
# - protocol imap { mail_max_userip_connections = CONNS+100 } (default 10 per user and address).
# - default_client_limit = CONNS+1000 (default 1000: anvil, stats, auth, log and config take one
#   connection per imap process).
DOVECOT_HIBERNATE=${DOVECOT_HIBERNATE:-5s}

dovecot_tuning() {
  local conns=$1
  cat <<EOF
# ---- tuned by mailstow bench/dovecot-tuning.sh (DOVECOT_TUNED=1) for $conns connections
default_client_limit = $((conns + 1000))
service imap-login {
  service_count = 0
  process_min_avail = 2
  client_limit = $((conns + 1000))
  vsz_limit = 1G
}
service imap {
  service_count = 100
  process_limit = $((conns + 200))
  unix_listener imap-master {
    user = \$default_internal_user
  }
}
service imap-hibernate {
  client_limit = $(( conns + 1000 < 4000 ? conns + 1000 : 4000 ))
  vsz_limit = 1G
}
imap_hibernate_timeout = $DOVECOT_HIBERNATE
protocol imap {
  mail_max_userip_connections = $((conns + 100))
}
# ---- end of tuning
EOF
}

# dc_tuning_summary CONF: the effective values (doveconf -n) of what the tuning touches, one line
dc_tuning_summary() {
  doveconf -c "$1" -n 2>/dev/null | awk '
    function val() { v = $0; sub(/^[^=]*= */, "", v); gsub(/ /, "", v); return v }
    /^(service|protocol) [a-z-]+ \{/ { s = $2 }
    /^}/ { s = "" }
    s ~ /^imap/ && $1 ~ /^(service_count|process_min_avail|client_limit|process_limit|vsz_limit|mail_max_userip_connections|mail_plugins)$/ { printf "%s.%s=%s ", s, $1, val() }
    s == "" && $1 ~ /^(imap_hibernate_timeout|default_client_limit|default_process_limit|imap_compress_deflate_level)$/ { printf "%s=%s ", $1, val() }'
}

# dovecot_limits CONNS: DOVECOT_TUNED=0 for CONNS connections: only the limits without which the
# untuned Dovecot could not hold them (one imap process per connection, as by default).
dovecot_limits() {
  local conns=$1
  cat <<EOF2
# ---- limits raised by mailstow bench/dovecot-tuning.sh (DOVECOT_TUNED=0) for $conns connections
default_client_limit = $((conns + 1000))
service imap {
  process_limit = $((conns + 200))
}
protocol imap {
  mail_max_userip_connections = $((conns + 100))
}
# ---- end of limits
EOF2
}
