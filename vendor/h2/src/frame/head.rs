use super::StreamId;

use bytes::BufMut;

#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub struct Head {
    kind: Kind,
    flag: u8,
    stream_id: StreamId,
}

#[repr(u8)]
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum Kind {
    Data = 0,
    Headers = 1,
    Priority = 2,
    Reset = 3,
    Settings = 4,
    PushPromise = 5,
    Ping = 6,
    GoAway = 7,
    WindowUpdate = 8,
    Continuation = 9,
    Unknown,
}

// ===== impl Head =====

impl Head {
    pub fn new(kind: Kind, flag: u8, stream_id: StreamId) -> Head {
        Head {
            kind,
            flag,
            stream_id,
        }
    }

    /// Parse an HTTP/2 frame header
    pub fn parse(header: &[u8]) -> Head {
        let (stream_id, _) = StreamId::parse(&header[5..]);

        Head {
            kind: Kind::new(header[3]),
            flag: header[4],
            stream_id,
        }
    }

    pub fn stream_id(&self) -> StreamId {
        self.stream_id
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn flag(&self) -> u8 {
        self.flag
    }

    pub fn encode_len(&self) -> usize {
        super::HEADER_LEN
    }

    pub fn encode<T: BufMut>(&self, payload_len: usize, dst: &mut T) {
        debug_assert!(self.encode_len() <= dst.remaining_mut());

        // tern patch: the nine bytes in one write, not four (each a
        // `BufMut` call and a copy): the length's low 24 bits, as
        // `put_uint(len, 3)` wrote them.
        let len = (payload_len as u32).to_be_bytes();
        let id = u32::from(self.stream_id).to_be_bytes();
        dst.put_slice(&[
            len[1],
            len[2],
            len[3],
            self.kind as u8,
            self.flag,
            id[0],
            id[1],
            id[2],
            id[3],
        ]);
    }
}

// ===== impl Kind =====

impl Kind {
    pub fn new(byte: u8) -> Kind {
        match byte {
            0 => Kind::Data,
            1 => Kind::Headers,
            2 => Kind::Priority,
            3 => Kind::Reset,
            4 => Kind::Settings,
            5 => Kind::PushPromise,
            6 => Kind::Ping,
            7 => Kind::GoAway,
            8 => Kind::WindowUpdate,
            9 => Kind::Continuation,
            _ => Kind::Unknown,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// tern patch: the frame head written in one piece is what the four
    /// writes made: the length's low 24 bits big-endian, type, flags, id.
    #[test]
    fn a_frame_head_is_written_as_its_nine_bytes() {
        let mut dst = bytes::BytesMut::new();
        Head::new(Kind::Headers, 0x5, StreamId::from(0x0102_0304)).encode(0x0a_0b0c, &mut dst);
        Head::new(Kind::Data, 0x1, StreamId::from(7)).encode(0x0100_0001, &mut dst);
        assert_eq!(
            &dst[..],
            &[
                0x0a, 0x0b, 0x0c, 1, 0x5, 0x01, 0x02, 0x03, 0x04, //
                0x00, 0x00, 0x01, 0, 0x1, 0, 0, 0, 7,
            ]
        );
    }
}
