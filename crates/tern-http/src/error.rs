//! The one error type of tern-http.

/// Why a message was refused. Every variant is a client (or backend) fault
/// that is answered, never a reason to panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The head did not end within the size limit, or had too many fields (431).
    #[error("head too large")]
    HeadTooLarge,
    /// A line ended with LF alone.
    #[error("bare LF in head")]
    BareLf,
    /// A CR not followed by LF.
    #[error("bare CR in head")]
    BareCr,
    /// A NUL byte in the head.
    #[error("NUL in head")]
    Nul,
    /// A field line starting with whitespace (obsolete line folding).
    #[error("obsolete line folding")]
    ObsFold,
    /// Whitespace between a field name and its colon.
    #[error("whitespace before colon")]
    SpaceBeforeColon,
    /// Both Content-Length and Transfer-Encoding.
    #[error("both Content-Length and Transfer-Encoding")]
    ContentLengthAndTransferEncoding,
    /// More than one Content-Length.
    #[error("duplicate Content-Length")]
    DuplicateContentLength,
    /// A Content-Length that is not 1 to 19 digits.
    #[error("malformed Content-Length")]
    BadContentLength,
    /// A Transfer-Encoding whose last coding is not chunked.
    #[error("Transfer-Encoding does not end in chunked")]
    TransferEncodingNotChunked,
    /// Transfer-Encoding in an HTTP/1.0 request.
    #[error("Transfer-Encoding in an HTTP/1.0 request")]
    TransferEncodingInHttp10,
    /// An HTTP/1.1 request without a Host field, or with several.
    #[error("missing or repeated Host")]
    BadHost,
    /// A malformed chunk size, extension, data end or trailer.
    #[error("bad chunk: {0}")]
    BadChunk(&'static str),
    /// Any other syntax error.
    #[error("malformed head: {0}")]
    Malformed(&'static str),
    /// A PROXY protocol header could not be parsed.
    #[error("bad PROXY protocol header: {0}")]
    BadProxyHeader(String),
}

impl HttpError {
    /// The status code to answer a client whose request failed this way.
    pub fn status(&self) -> u16 {
        match self {
            HttpError::HeadTooLarge => 431,
            _ => 400,
        }
    }
}
