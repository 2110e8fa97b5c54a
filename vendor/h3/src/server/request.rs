use std::{
    convert::TryFrom,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Buf;
use http::{Request, StatusCode};

#[cfg(feature = "tracing")]
use tracing::instrument;

use crate::{
    connection::{self},
    error::{
        connection_error_creators::{CloseStream, HandleFrameStreamErrorOnRequestStream},
        internal_error::InternalConnectionError,
        Code, StreamError,
    },
    frame::{FrameStream, FrameStreamError},
    proto::{
        frame::{Frame, PayloadLen},
        headers::Header,
    },
    qpack,
    quic::{self, SendStream, StreamId},
    shared_state::{ConnectionState, SharedState},
};

use super::{connection::RequestEnd, stream::RequestStream};

/// Helper struct to await the request headers and return a `Request` object
pub struct RequestResolver<C, B>
where
    C: quic::Connection<B>,
    C::BidiStream: quic::SendStream<B>,
    B: Buf,
{
    #[doc(hidden)]
    // TODO: make this private
    pub frame_stream: FrameStream<C::BidiStream, B>,
    // tern patch: the request's share of the connection's count of
    // running requests (was the sender of a channel its end went on).
    pub(super) request_end: RequestEnd,
    pub(super) send_grease_frame: bool,
    pub(super) max_field_section_size: u64,
    pub(super) shared: Arc<SharedState>,
}

impl<C, B> ConnectionState for RequestResolver<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    fn shared_state(&self) -> &SharedState {
        &self.shared
    }
}

impl<C, B> CloseStream for RequestResolver<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
}

impl<C, B> RequestResolver<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    /// Returns a future to await the request headers and return a `Request` object
    #[cfg_attr(feature = "tracing", instrument(skip_all, level = "trace"))]
    pub async fn resolve_request(
        mut self,
    ) -> Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError> {
        let frame = std::future::poll_fn(|cx| self.frame_stream.poll_next(cx)).await;
        let req = self.accept_with_frame(frame)?;
        Ok(req.resolve().await?)
    }

    /// tern patch: `resolve_request` without waiting, for a head that has
    /// arrived with its stream (the usual case): the request is made here,
    /// not through `resolve_request`'s and `resolve`'s futures, whose
    /// states moved the stream and the request several times (memcpy,
    /// ~1,000 instructions per request). The same checks in the same
    /// order; `NotYet` gives the resolver back for `resolve_request`, and
    /// a head over the size limit comes back for `ResolvedRequest::resolve`
    /// to send its 431.
    pub fn resolve_request_now(mut self) -> ResolveNow<C, B> {
        // Nothing is waited on with this waker: on `Pending` the caller
        // polls the stream again at once, with its task's waker.
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let frame = match self.frame_stream.poll_next(&mut cx) {
            Poll::Ready(frame) => frame,
            Poll::Pending => return ResolveNow::NotYet(self),
        };
        let mut resolved = match self.accept_with_frame(frame) {
            Ok(resolved) => resolved,
            Err(e) => return ResolveNow::Resolved(Err(e)),
        };
        match std::mem::replace(&mut resolved.decoded, Err(0)) {
            Ok(decoded) => ResolveNow::Resolved(ResolvedRequest::<C, B>::request_from(
                decoded.fields,
                resolved.request_stream,
            )),
            Err(cancel_size) => {
                resolved.decoded = Err(cancel_size);
                ResolveNow::TooLarge(resolved)
            }
        }
    }

    /// Accepts a http request where the first frame has already been read and decoded.
    ///
    /// This is needed as a bidirectional stream may be read as part of incoming webtransport
    /// bi-streams. If it turns out that the stream is *not* a `WEBTRANSPORT_STREAM` the request
    /// may still want to be handled and passed to the user.
    #[cfg_attr(feature = "tracing", instrument(skip_all, level = "trace"))]
    pub fn accept_with_frame(
        mut self,
        frame: Result<Option<Frame<PayloadLen>>, FrameStreamError>,
    ) -> Result<ResolvedRequest<C, B>, StreamError> {
        let mut encoded = match frame {
            Ok(Some(Frame::Headers(h))) => h,

            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.1
            //# If a client-initiated
            //# stream terminates without enough of the HTTP message to provide a
            //# complete response, the server SHOULD abort its response stream with
            //# the error code H3_REQUEST_INCOMPLETE.
            Ok(None) => {
                self.frame_stream.reset(Code::H3_REQUEST_INCOMPLETE.value());
                return Err(StreamError::StreamError {
                    code: Code::H3_REQUEST_INCOMPLETE,
                    reason: "stream terminated without headers".to_string(),
                });
            }

            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.1
            //# Receipt of an invalid sequence of frames MUST be treated as a
            //# connection error of type H3_FRAME_UNEXPECTED.

            //= https://www.rfc-editor.org/rfc/rfc9114#section-7.2.5
            //# A server MUST treat the
            //# receipt of a PUSH_PROMISE frame as a connection error of type
            //# H3_FRAME_UNEXPECTED.
            Ok(Some(_)) => {
                //= https://www.rfc-editor.org/rfc/rfc9114#section-4.1
                //# Receipt of an invalid sequence of frames MUST be treated as a
                //# connection error of type H3_FRAME_UNEXPECTED.
                // Close if the first frame is not a header frame
                return Err(
                    self.handle_connection_error_on_stream(InternalConnectionError::new(
                        Code::H3_FRAME_UNEXPECTED,
                        "first request frame is not headers".to_string(),
                    )),
                );
            }
            Err(e) => {
                return Err(self.handle_frame_stream_error_on_request_stream(e));
            }
        };

        let decoded = match qpack::decode_stateless(&mut encoded, self.max_field_section_size) {
            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.2.2
            //# An HTTP/3 implementation MAY impose a limit on the maximum size of
            //# the message header it will accept on an individual HTTP message.
            Err(qpack::DecoderError::HeaderTooLong(cancel_size)) => Err(cancel_size),
            Ok(decoded) => Ok(decoded),
            Err(_e) => {
                return Err(
                    self.handle_connection_error_on_stream(InternalConnectionError {
                        code: Code::QPACK_DECOMPRESSION_FAILED,
                        message: "Failed to decode headers".to_string(),
                    }),
                );
            }
        };

        let request_stream = RequestStream {
            request_end: self.request_end,
            inner: connection::RequestStream::new(
                self.frame_stream,
                self.max_field_section_size,
                self.shared.clone(),
                self.send_grease_frame,
            ),
        };

        Ok(ResolvedRequest::new(
            request_stream,
            decoded,
            self.max_field_section_size,
        ))
    }
}

/// tern patch: what [`RequestResolver::resolve_request_now`] found.
pub enum ResolveNow<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    /// What `resolve_request` would have returned.
    Resolved(Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError>),
    /// The head has not all arrived: `resolve_request` waits for it.
    NotYet(RequestResolver<C, B>),
    /// A head over the size limit: `resolve` answers it (431) and returns
    /// the error.
    TooLarge(ResolvedRequest<C, B>),
}

/// A request whose HEADERS frame was read and decoded (tern patch:
/// exported for [`ResolveNow::TooLarge`], whose `resolve` sends the 431).
pub struct ResolvedRequest<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    request_stream: RequestStream<C::BidiStream, B>,
    // Ok or `REQUEST_HEADER_FIELDS_TO_LARGE` which needs to be sent
    decoded: Result<qpack::Decoded, u64>,
    max_field_section_size: u64,
}

impl<B, C> ResolvedRequest<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    /// A request from its stream and its decoded head (or the size of a
    /// head over the limit).
    pub fn new(
        request_stream: RequestStream<C::BidiStream, B>,
        decoded: Result<qpack::Decoded, u64>,
        max_field_section_size: u64,
    ) -> Self {
        Self {
            request_stream,
            decoded,
            max_field_section_size,
        }
    }

    /// Finishes the resolution of the request
    #[cfg_attr(feature = "tracing", instrument(skip_all, level = "trace"))]
    pub async fn resolve(
        mut self,
    ) -> Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError> {
        let fields = match self.decoded {
            Ok(v) => v.fields,
            Err(cancel_size) => {
                // Send and await the error response
                self.request_stream
                    .send_response(
                        http::Response::builder()
                            .status(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
                            .body(())
                            .expect("header too big response"),
                    )
                    .await?;

                return Err(StreamError::HeaderTooBig {
                    actual_size: cancel_size,
                    max_size: self.max_field_section_size,
                });
            }
        };

        Self::request_from(fields, self.request_stream)
    }

    /// tern patch: the request made from its decoded fields, as `resolve`
    /// did after its size check (`resolve_request_now` calls it without a
    /// future).
    fn request_from(
        fields: Vec<crate::qpack::HeaderField>,
        mut request_stream: RequestStream<C::BidiStream, B>,
    ) -> Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError> {
        // Parse the request headers
        let result = match Header::try_from(fields) {
            Ok(header) => match header.into_request_parts() {
                Ok(parts) => Ok(parts),
                Err(err) => Err(err),
            },
            Err(err) => Err(err),
        };
        let (method, uri, protocol, headers) = match result {
            Ok(parts) => parts,
            Err(err) => {
                //= https://www.rfc-editor.org/rfc/rfc9114#section-4.1.2
                //# Malformed requests or responses that are
                //# detected MUST be treated as a stream error of type H3_MESSAGE_ERROR.
                let error_code = Code::H3_MESSAGE_ERROR;
                request_stream.stop_stream(error_code);
                request_stream.stop_sending(error_code);

                return Err(StreamError::StreamError {
                    code: error_code,
                    reason: format!("Malformed request with error: {}", err),
                });
            }
        };

        //  request_stream.stop_stream(Code::H3_MESSAGE_ERROR).await;

        let mut req = http::Request::new(());
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        // NOTE: insert `Protocol` and not `Option<Protocol>`
        if let Some(protocol) = protocol {
            req.extensions_mut().insert(protocol);
        }
        *req.version_mut() = http::Version::HTTP_3;
        #[cfg(feature = "tracing")]
        tracing::trace!("replying with: {:?}", req);

        Ok((req, request_stream))
    }
}
