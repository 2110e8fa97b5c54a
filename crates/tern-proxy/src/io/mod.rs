//! Moving bytes under bounds: read buffers with a hard size limit, timers
//! that cost nothing on the fast path, HTTP/1.1 body pieces and tunnels,
//! and flow-controlled HTTP/2 sends. Used by front ends, the exchange core
//! and backend clients alike; knows none of them.

pub(crate) mod body;
pub(crate) mod h2data;
pub(crate) mod h2stream;
pub(crate) mod iobuf;
pub(crate) mod write;
