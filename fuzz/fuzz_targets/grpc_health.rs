//! A backend's answer to tern's gRPC health check (`health_check_grpc`),
//! from any bytes: a status or nothing, never a panic; a status only from
//! one uncompressed message whose length prefix is right.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if tern_proxy::fuzzing::grpc_health(data).is_some() {
        assert_eq!(data[0], 0);
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        assert_eq!(len, data.len() - 5);
    }
});
