//! What can go wrong obtaining a certificate.

use std::path::PathBuf;

/// An ACME failure, worded for the log and `/health`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcmeError {
    /// The CA answered with an error; `problem` is its problem document
    /// (type and detail), e.g. a rate limit or a failed validation.
    #[error("{context}: the CA refused: {problem}")]
    Refused {
        /// What tern was doing.
        context: &'static str,
        /// The CA's problem document, as text.
        problem: String,
    },
    /// The CA could not be reached or spoke no ACME.
    #[error("{context}: {message}")]
    Protocol {
        /// What tern was doing.
        context: &'static str,
        /// Why.
        message: String,
    },
    /// A challenge was not validated; `problem` is the CA's reason.
    #[error("validating {name} over {challenge} failed: {problem}")]
    Validation {
        /// The DNS name.
        name: String,
        /// "tls-alpn-01" or "http-01".
        challenge: &'static str,
        /// The CA's problem document, as text.
        problem: String,
    },
    /// The state directory could not be read or written.
    #[error("{}: {source}", path.display())]
    State {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A key, CSR or certificate could not be made or parsed.
    #[error("{0}")]
    Certificate(String),
}

impl AcmeError {
    pub(crate) fn from_acme(context: &'static str, e: instant_acme::Error) -> Self {
        match e {
            instant_acme::Error::Api(problem) => AcmeError::Refused {
                context,
                problem: problem_text(&problem),
            },
            other => AcmeError::Protocol {
                context,
                message: with_sources(&other),
            },
        }
    }

    pub(crate) fn state(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| AcmeError::State { path, source }
    }
}

/// `type: detail` of a problem document, with its subproblems.
pub(crate) fn problem_text(p: &instant_acme::Problem) -> String {
    let kind = p
        .r#type
        .as_deref()
        .map(|t| t.trim_start_matches("urn:ietf:params:acme:error:"))
        .unwrap_or("unknown");
    let mut text = format!("{kind}: {}", p.detail.as_deref().unwrap_or("(no detail)"));
    for sub in &p.subproblems {
        text.push_str(&format!("; {sub}"));
    }
    text
}

/// An error and its causes, "outer: inner: root" (hyper's own text says
/// only "client error (Connect)").
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}
