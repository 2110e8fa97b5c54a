// tern patch: the field list `decode_stateless` takes per thread.
pub(crate) use self::decoder::give_back_field_list;

pub use self::{
    decoder::{decode_stateless, Decoded, DecoderError},
    encoder::{encode_stateless, encode_stateless_fields, encode_stateless_header, EncoderError},
    field::HeaderField,
    repeat::encode_stateless_field_list,
};

mod block;
mod dynamic;
mod field;
mod parse_error;
mod static_;
mod stream;
mod vas;

mod decoder;
mod encoder;

mod prefix_int;
// tern patch: response fields that repeat, written as kept.
mod repeat;
mod prefix_string;

// tern patch: reached from tern's fuzz target (see the module's doc).
#[cfg(fuzzing)]
pub mod fuzz_bridge;

#[cfg(test)]
mod tests;

#[derive(Debug)]
pub enum Error {
    Encoder(EncoderError),
    Decoder(DecoderError),
}

impl std::error::Error for Error {}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Encoder(e) => write!(f, "Encoder {}", e),
            Error::Decoder(e) => write!(f, "Decoder {}", e),
        }
    }
}
