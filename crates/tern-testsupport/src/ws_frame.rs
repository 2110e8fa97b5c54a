//! WebSocket frames (RFC 6455 section 5) written and read by hand, for
//! tests whose client speaks WebSocket over a stream no WebSocket library
//! here takes: an HTTP/2 (RFC 8441) or HTTP/3 (RFC 9220) extended CONNECT
//! stream. Text and binary frames of one fragment only.

/// A client's text frame for `message` (FIN, masked as clients must).
pub fn client_text(message: &str) -> Vec<u8> {
    let payload = message.as_bytes();
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let mut frame = vec![0x81];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= 0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// The first whole frame a server sent in `buf` (unmasked, as servers
/// send): its opcode, payload and length on the wire; None until it has
/// all arrived.
pub fn server_frame(buf: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    let opcode = buf.first()? & 0x0f;
    let (len, at) = match buf.get(1)? & 0x7f {
        126 => (
            u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let payload = buf.get(at..at + len)?;
    Some((opcode, payload.to_vec(), at + len))
}

/// The text of every whole text frame at the start of `buf`, and the
/// bytes they took.
pub fn server_texts(buf: &[u8]) -> (Vec<String>, usize) {
    let (mut texts, mut used) = (Vec::new(), 0);
    while let Some((opcode, payload, n)) = server_frame(&buf[used..]) {
        if opcode == 1 {
            texts.push(String::from_utf8_lossy(&payload).into_owned());
        }
        used += n;
    }
    (texts, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_each_length_form_read_back() {
        for n in [5, 200, 70_000] {
            let text = "x".repeat(n);
            let mut frame = client_text(&text);
            // Unmask into a server frame: same header less the mask bit and key.
            let at = frame.len() - n - 4;
            let mask: [u8; 4] = frame[at..at + 4].try_into().unwrap();
            let payload: Vec<u8> = frame[at + 4..]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ mask[i % 4])
                .collect();
            frame.truncate(at);
            frame[1] &= 0x7f;
            frame.extend_from_slice(&payload);
            assert_eq!(server_texts(&frame), (vec![text], frame.len()));
            assert!(server_frame(&frame[..frame.len() - 1]).is_none());
        }
    }
}
