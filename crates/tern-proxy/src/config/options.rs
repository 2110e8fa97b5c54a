//! The options of `tern serve`, each declared once: one field of one of
//! the structs below is the option's command-line flag, its TOML key, its
//! `--help` text and its row in docs/config.md, and its default is a named
//! constant in [`defaults`] that the help, the docs and the resolution all
//! read. Values stay strings here (so that "was it given?" is `is_some()`);
//! `config::resolve` turns them into typed settings in one place.
//!
//! How the pieces fit:
//! - clap reads the doc comment of a field for `--help`, and its
//!   `default_value` / `default_values` for the `[default: X]` there;
//!   serde reads the same field from `tern.toml` (the key is the field name).
//! - `tern serve` clears the values clap filled in from a default before
//!   handing the options over, so `None` (or an empty list) means "not
//!   given" on both paths and resolution applies the constant itself.
//! - docs/config.md's reference is generated from these structs
//!   (`reference.rs`; `tern serve --config-reference` prints it, a test
//!   compares). TOML-only tables (`[[upstream]]`, `[[listener.route]]`,
//!   `[[listener.certificate]]`) derive `clap::Args` too, only so that their
//!   docs and defaults are read the same way; they are never parsed from a
//!   command line.
//! - With `--config`, every [`ListenerOptions`] flag given on the command
//!   line is refused by name: `tern serve` finds them with clap's
//!   `ArgMatches::value_source`, so a new field is covered without a list;
//!   every top-level and `[acme]` flag given replaces the file's value
//!   (`file.rs` lays the given options over the file's through serde,
//!   also without a list).
//!
//! # How to add an option
//!
//! 1. Add a field to the table it belongs to (the top-level and `[acme]`
//!    flags here, a listener's in `listener.rs`, TOML-only tables in
//!    `tables.rs`): a doc comment (one paragraph: what it does,
//!    units and bounds, never the default), `#[arg(long, value_name =
//!    "…")]` (`#[arg(skip)]` for a TOML-only key of a flag table), and an `Option<T>` type (`Vec<String>` for lists; `bool` for
//!    a listener switch that is off by default, `Option<bool>` at the top
//!    level). Nothing else is needed for `--config` to refuse a listener
//!    flag or to let a top-level flag override the file.
//! 2. If it has a default, add a constant to [`defaults`] (`defaults.rs`;
//!    typed: `u32`, `usize`, `bool`, `&str`, `Duration`; `[&str; N]` for a
//!    list) and
//!    name it in the attribute: `default_value = shown(defaults::X)`, or
//!    `default_values = defaults::X` for a list. A default that is not one
//!    value (e.g. "number of CPU cores") stays prose in the doc comment.
//! 3. Resolve it in `resolve.rs` (or `upstream.rs`, `acme.rs`) with
//!    `o.x.unwrap_or(defaults::X)` into the typed settings of `mod.rs`;
//!    errors name the key with `key_err("x", …)`.
//! 4. Regenerate docs/config.md: `cargo run -p tern -- serve
//!    --config-reference` and paste it between the markers (the test
//!    `docs_config_md_carries_the_generated_reference` says when to).

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod defaults;
mod listener;
mod tables;

use listener::one_or_many;
pub use listener::ListenerOptions;
pub use tables::{CertificateOptions, RouteOptions, ServerOptions, UpstreamOptions};

/// A default as an option spells it (`128`, `true`, `10s`), for `--help`
/// and docs/config.md: `#[arg(default_value = shown(defaults::X))]`.
pub fn shown(value: impl Shown) -> String {
    value.option_text()
}

/// A value that can be shown as an option's text.
pub trait Shown {
    /// The text an option would be given to mean this value.
    fn option_text(&self) -> String;
}

macro_rules! shown_as_display {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn option_text(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
shown_as_display!(u8, u32, usize, bool, &str);

impl Shown for Duration {
    fn option_text(&self) -> String {
        humantime::format_duration(*self).to_string()
    }
}

/// Process-wide options (top level of the TOML file). Serialize lets
/// `load_file` lay the command line's values over the file's without a
/// list of fields; so that a switch given on the command line can be told
/// from an absent one, top-level options take values (`Option<bool>`,
/// never a bare `bool`; a test checks).
#[derive(Debug, Default, Clone, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalOptions {
    /// Worker threads, each with its own listener socket (SO_REUSEPORT) and
    /// event loop. [default: number of CPU cores]
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// How workers accept: "reuseport" (one listening socket per worker, the
    /// kernel spreads connections) or "shared" (one socket polled by all).
    #[arg(long, value_name = "MODE", hide = true, default_value = defaults::ACCEPT)]
    pub accept: Option<String>,

    /// Log format for diagnostics and the access log: "text" or "json".
    #[arg(long, value_name = "FORMAT", default_value = defaults::LOG_FORMAT)]
    pub log_format: Option<String>,

    /// Where access-log lines go: a file path, "-" for standard output, or
    /// "off".
    #[arg(long, value_name = "PATH", default_value = defaults::ACCESS_LOG)]
    pub access_log: Option<String>,

    /// On SIGTERM/SIGINT, how long in-flight requests may take to finish
    /// before tern exits anyway.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::SHUTDOWN_TIMEOUT))]
    pub shutdown_timeout: Option<String>,

    /// Admin listener serving Prometheus /metrics and /health, ADDR:PORT.
    /// Off by default; only loopback addresses are accepted.
    #[arg(long, value_name = "ADDR:PORT")]
    pub admin: Option<String>,

    /// DNS server that resolves backends given by name, IP or IP:PORT (port
    /// 53 when absent). [default: the nameservers of /etc/resolv.conf]
    #[arg(long, value_name = "ADDR:PORT")]
    pub resolver: Option<String>,

    /// Shortest time between two resolutions of a backend name: a record
    /// with a shorter TTL (or 0) is re-resolved after this long.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::RESOLVER_MIN_TTL))]
    pub resolver_min_ttl: Option<String>,

    /// Longest time between two resolutions of a backend name, whatever
    /// the TTL; also the wait before retrying a name whose resolution
    /// failed is at most this long.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::RESOLVER_MAX_TTL))]
    pub resolver_max_ttl: Option<String>,

    /// Unix socket on which the running tern hands its listening sockets to
    /// a new binary started with `tern serve --upgrade` (docs/upgrade.md).
    /// Off by default.
    #[arg(long, value_name = "PATH")]
    pub upgrade_socket: Option<String>,

    /// User to run as once the listening sockets are open and the keys
    /// read (e.g. "nobody"); tern must start as root for it. Off by
    /// default: tern keeps the user it was started as.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    /// Group to run as with `user`. [default: the user's primary group]
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,

    /// Where certificates named by `acme` come from (TOML `[acme]` table).
    #[command(flatten)]
    #[serde(default)]
    pub acme: AcmeOptions,

    /// Backend groups (TOML `[[upstream]]` tables).
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    pub upstream: Vec<UpstreamOptions>,

    /// Listeners (TOML `[[listener]]` tables; the command line describes one).
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    pub listener: Vec<ListenerOptions>,
}

/// The ACME CA certificates are obtained from, and where they are kept
/// (TOML `[acme]`; used by certificates with `acme` names).
#[derive(Debug, Default, Clone, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeOptions {
    /// ACME directory: "letsencrypt", "letsencrypt-staging" or a URL.
    #[arg(long = "acme-directory", value_name = "URL", default_value = defaults::ACME_DIRECTORY)]
    pub directory: Option<String>,

    /// Account contact, e.g. mailto:ops@example.com; repeat for several.
    #[arg(long = "acme-contact", value_name = "URI")]
    #[serde(default)]
    pub contact: Vec<String>,

    /// Directory for the ACME account, certificates, keys and locks (mode
    /// 0700); instances sharing it order each certificate once.
    /// [default: $XDG_DATA_HOME/tern/acme, ~/.local/share/tern/acme or /var/lib/tern/acme]
    #[arg(long = "acme-state-dir", value_name = "DIR")]
    pub state_dir: Option<String>,

    /// Root certificate (PEM) trusted for the ACME directory's HTTPS
    /// instead of the system's: for private and test CAs.
    #[arg(long = "acme-ca-root", value_name = "FILE")]
    pub ca_root: Option<String>,

    /// External Account Binding key identifier, for CAs that require one.
    #[arg(long = "acme-eab-kid", value_name = "KID")]
    pub eab_kid: Option<String>,

    /// External Account Binding HMAC key, base64url as the CA gives it.
    #[arg(long = "acme-eab-hmac-key", value_name = "KEY")]
    pub eab_hmac_key: Option<String>,

    /// First wait after a failed order; doubles on each further failure up
    /// to 6h, with jitter.
    #[arg(long = "acme-retry", value_name = "DURATION", default_value = shown(defaults::ACME_RETRY))]
    pub retry: Option<String>,
}
