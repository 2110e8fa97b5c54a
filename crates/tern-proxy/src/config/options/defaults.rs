//! Every default of `tern serve`, named once: `--help`, docs/config.md and
//! the resolution of a missing option all read these.

use std::time::Duration;

/// `accept`: one listening socket per worker.
pub const ACCEPT: &str = "reuseport";
/// `log_format`.
pub const LOG_FORMAT: &str = "text";
/// `access_log`: standard output.
pub const ACCESS_LOG: &str = "-";
/// `shutdown_timeout`.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// `[acme] directory`.
pub const ACME_DIRECTORY: &str = "letsencrypt";
/// `[acme] retry`: first wait after a failed order.
pub const ACME_RETRY: Duration = Duration::from_secs(60);

/// `listen`.
pub const LISTEN: &str = "127.0.0.1:8443";
/// `mode`.
pub const MODE: &str = "http";
/// `balance` of a listener's backends and of an `[[upstream]]`.
pub const BALANCE: &str = "round_robin";
/// `h2_max_concurrent_streams`.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 128;
/// `h2_max_header_list_size`.
pub const H2_MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;
/// `h2_header_table_size`.
pub const H2_HEADER_TABLE_SIZE: u32 = 4096;
/// `h2_max_resets_per_second`.
pub const H2_MAX_RESETS_PER_SECOND: u32 = 200;
/// `h3_max_streams`.
pub const H3_MAX_STREAMS: u32 = 100;
/// `quic_retry_above`.
pub const QUIC_RETRY_ABOVE: u32 = 100;
/// `quic_gso`.
pub const QUIC_GSO: bool = true;
/// `quic_early_data`.
pub const QUIC_EARLY_DATA: bool = false;
/// `alt_svc_max_age`, in seconds.
pub const ALT_SVC_MAX_AGE: u32 = 86400;
/// `acme_key_types` of a listener, `key_types` of a certificate table.
pub const ACME_KEY_TYPES: [&str; 1] = ["ecdsa"];
/// `alpn` in http mode (tcp mode offers none unless given).
pub const ALPN: [&str; 2] = ["h2", "http/1.1"];
/// `client_auth`: no client certificate asked for.
pub const CLIENT_AUTH: &str = "none";
/// `session_cache` entries.
pub const SESSION_CACHE: usize = 20_480;
/// `tickets`.
pub const TICKETS: bool = true;
/// `ticket_rotation`.
pub const TICKET_ROTATION: Duration = Duration::from_secs(12 * 3600);
/// `forwarded`: all three fields.
pub const FORWARDED: [&str; 3] = ["x-forwarded-for", "x-forwarded-proto", "forwarded"];
/// `handshake_timeout`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// `header_timeout`.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// `idle_timeout`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// `backend_connect_timeout`.
pub const BACKEND_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `backend_response_timeout`.
pub const BACKEND_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// `max_connections`.
pub const MAX_CONNECTIONS: usize = 10_000;
/// `max_head_bytes`.
pub const MAX_HEAD_BYTES: usize = tern_http::head::DEFAULT_MAX_HEAD_BYTES;
/// `backend_pool_size`.
pub const BACKEND_POOL_SIZE: usize = 1024;
/// `request_id_header`.
pub const REQUEST_ID_HEADER: &str = "X-Request-Id";
/// `request_id_format`.
pub const REQUEST_ID_FORMAT: &str = "random";
/// `client_burst`.
pub const CLIENT_BURST: u32 = 10;
/// `client_rate_close_after`: far more than a browser's burst of
/// subresources that overshoots a rate, few enough that a flooding
/// connection is cut within milliseconds.
pub const CLIENT_RATE_CLOSE_AFTER: u32 = 20;
/// `client_ipv6_prefix`: a host is usually given a /64.
pub const CLIENT_IPV6_PREFIX: u8 = 64;
/// `log_rejected`.
pub const LOG_REJECTED: bool = false;

/// `[[upstream]] tls_sni`.
pub const TLS_SNI: bool = true;
/// `[[upstream]] tls_alpn` of an HTTP/1.1 group.
pub const TLS_ALPN: [&str; 1] = ["http/1.1"];
/// `[[upstream]] health_check_interval` (also for `--health-check`).
pub const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// `[[upstream]] health_check_timeout` (also for `--health-check`).
pub const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(1);
/// `[[upstream]] rise` (also for `--health-check`).
pub const RISE: u32 = 2;
/// `[[upstream]] fall` (also for `--health-check`).
pub const FALL: u32 = 3;
/// `[[upstream]] max_fails` (also for `--backend` lists).
pub const MAX_FAILS: u32 = 3;
/// `[[upstream]] fail_timeout` (also for `--backend` lists).
pub const FAIL_TIMEOUT: Duration = Duration::from_secs(10);
/// `resolver_min_ttl`.
pub const RESOLVER_MIN_TTL: Duration = Duration::from_secs(1);
/// `resolver_max_ttl`.
pub const RESOLVER_MAX_TTL: Duration = Duration::from_secs(60);
/// Weight of a server given without one.
pub const WEIGHT: u32 = 1;
/// `[[upstream]] hash_key`.
pub const HASH_KEY: &str = "client_ip";
/// `[[upstream]] hash_balance_factor`: off (pure affinity).
pub const HASH_BALANCE_FACTOR: u32 = 0;
/// `[[upstream]] sticky_cookie`.
pub const STICKY_COOKIE: &str = "tern_server";
/// `[[upstream]] max_ejected_percent`.
pub const MAX_EJECTED_PERCENT: u32 = 50;
/// `[[upstream]] max_fail_timeout`.
pub const MAX_FAIL_TIMEOUT: Duration = Duration::from_secs(300);
/// `[[upstream]] slow_start`: off.
pub const SLOW_START: Duration = Duration::ZERO;
/// `[[upstream]] retry_on`.
pub const RETRY_ON: [&str; 2] = ["502", "503"];
/// `[[upstream]] retry_budget`, in percent of requests.
pub const RETRY_BUDGET: u32 = 20;
