//! The gRPC health check of an h2c or h2 group (`health_check_grpc`): the
//! standard `grpc.health.v1.Health/Check` call (grpc/grpc
//! doc/health-checking.md) that every gRPC server library ships, so an
//! operator need not expose an HTTP path next to the service. Healthy:
//! HTTP 200, `grpc-status: 0` and a `HealthCheckResponse` whose status is
//! SERVING. The messages are small enough to encode and read by hand (one
//! string field up, one enum field down) rather than pull in a protobuf
//! crate.

use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;

use super::health::{h2_error, CheckError};

/// The call's path.
const PATH: &str = "/grpc.health.v1.Health/Check";

/// Most response body bytes read: a `HealthCheckResponse` is 2 bytes
/// after its 5-byte prefix; a server sending more is not answering this.
const MAX_RESPONSE: usize = 64;

/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: u64 = 1;

/// One gRPC health check of `service` over the session `sender`.
pub(super) async fn check(
    sender: SendRequest<Bytes>,
    scheme: &str,
    authority: &str,
    service: &str,
) -> Result<u16, CheckError> {
    let request = http::Request::post(format!("{scheme}://{authority}{PATH}"))
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .header(http::header::USER_AGENT, "tern-health-check")
        .body(())
        .map_err(|_| CheckError::Malformed)?;
    let mut sender = sender.ready().await.map_err(h2_error)?;
    let (response, mut up) = sender.send_request(request, false).map_err(h2_error)?;
    up.send_data(request_message(service), true)
        .map_err(h2_error)?;
    let response = response.await.map_err(h2_error)?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(CheckError::Status(status));
    }
    // A trailers-only answer carries its grpc-status in the head.
    let (parts, mut body) = response.into_parts();
    if let Some(code) = parts.headers.get("grpc-status") {
        return Err(grpc_failure(code.as_bytes()));
    }
    let mut message = BytesMut::new();
    while let Some(piece) = body.data().await {
        let piece = piece.map_err(h2_error)?;
        let _ = body.flow_control().release_capacity(piece.len());
        if message.len() + piece.len() > MAX_RESPONSE {
            return Err(CheckError::Grpc(format!(
                "a health answer over {MAX_RESPONSE} bytes"
            )));
        }
        message.extend_from_slice(&piece);
    }
    let trailers = body.trailers().await.map_err(h2_error)?;
    match trailers.as_ref().and_then(|t| t.get("grpc-status")) {
        Some(code) if code.as_bytes() == b"0" => {}
        Some(code) => return Err(grpc_failure(code.as_bytes())),
        None => return Err(CheckError::Grpc("no grpc-status trailer".into())),
    }
    match serving_status(&message) {
        Some(SERVING) => Ok(status),
        Some(other) => Err(CheckError::Grpc(format!(
            "health status {} ({other})",
            status_name(other)
        ))),
        None => Err(CheckError::Grpc("an unreadable HealthCheckResponse".into())),
    }
}

fn grpc_failure(code: &[u8]) -> CheckError {
    CheckError::Grpc(format!(
        "grpc-status {}",
        String::from_utf8_lossy(&code[..code.len().min(16)])
    ))
}

/// A length-prefixed `HealthCheckRequest { service = 1 }` (the field left
/// out when empty, as protobuf does). `service` is at most 127 bytes
/// (config::upstream), so its length is one varint byte.
fn request_message(service: &str) -> Bytes {
    let mut field = Vec::with_capacity(2 + service.len());
    if !service.is_empty() {
        field.push(0x0a); // field 1, length-delimited
        field.push(service.len().min(127) as u8);
        field.extend_from_slice(&service.as_bytes()[..service.len().min(127)]);
    }
    let mut out = Vec::with_capacity(5 + field.len());
    out.push(0); // not compressed
    out.extend_from_slice(&(field.len() as u32).to_be_bytes());
    out.extend_from_slice(&field);
    Bytes::from(out)
}

/// The `status` (field 1) of the one length-prefixed `HealthCheckResponse`
/// in `body`; 0 (UNKNOWN) when the field is absent, as protobuf reads it.
/// None when the body is not one uncompressed message.
pub(crate) fn serving_status(body: &[u8]) -> Option<u64> {
    let (&flag, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let mut msg = rest.get(4..)?;
    if flag != 0 || msg.len() != len {
        return None;
    }
    let mut status = 0;
    while !msg.is_empty() {
        let key = varint(&mut msg)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = varint(&mut msg)?,
            // Unknown fields are skipped, as protobuf does.
            (_, 0) => {
                varint(&mut msg)?;
            }
            (_, 2) => {
                let n = usize::try_from(varint(&mut msg)?).ok()?;
                msg = msg.get(n..)?;
            }
            (_, 1) => msg = msg.get(8..)?,
            (_, 5) => msg = msg.get(4..)?,
            _ => return None,
        }
    }
    Some(status)
}

/// A protobuf varint from the front of `input` (at most 10 bytes).
fn varint(input: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&b, rest) = input.split_first()?;
        *input = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn status_name(status: u64) -> &'static str {
    match status {
        0 => "UNKNOWN",
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "not a ServingStatus",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_their_service_or_nothing() {
        assert_eq!(&request_message("")[..], b"\0\0\0\0\0");
        assert_eq!(&request_message("app")[..], b"\0\0\0\0\x05\x0a\x03app");
    }

    #[test]
    fn responses_are_read_as_protobuf_reads_them() {
        assert_eq!(serving_status(b"\0\0\0\0\x02\x08\x01"), Some(SERVING));
        assert_eq!(serving_status(b"\0\0\0\0\x02\x08\x02"), Some(2));
        // An empty message: status UNKNOWN.
        assert_eq!(serving_status(b"\0\0\0\0\0"), Some(0));
        // An unknown field before it is skipped.
        assert_eq!(
            serving_status(b"\0\0\0\0\x06\x12\x02hi\x08\x01"),
            Some(SERVING)
        );
        // Compressed, cut short, or a length that lies.
        assert_eq!(serving_status(b"\x01\0\0\0\x02\x08\x01"), None);
        assert_eq!(serving_status(b"\0\0\0\0\x02\x08"), None);
        assert_eq!(serving_status(b"\0\0\0\0\x09\x08\x01"), None);
        assert_eq!(serving_status(b"\0\0\0\0\x02\x08\xff"), None);
        assert_eq!(serving_status(b""), None);
    }
}
