//! Entry points for the fuzz targets in `fuzz/` (not an API): the parsers
//! of untrusted input that live inside this crate, on byte slices.

use std::net::SocketAddr;
use std::path::Path;

/// Decodes a PROXY protocol header as tern's listener does: a v1 line when
/// `bytes` starts with `PROXY `, else a whole v2 header. Returns the client
/// address, or None when tern would close the connection.
pub fn proxy_header(bytes: &[u8]) -> Option<SocketAddr> {
    let peer = SocketAddr::from(([192, 0, 2, 1], 1));
    let decoded = if bytes.starts_with(b"PROXY ") {
        crate::front::decode_proxy_v1(bytes, peer)
    } else {
        crate::front::decode_proxy_v2(bytes, peer)
    };
    decoded.ok()
}

/// Writes a PROXY v2 header whose SSL TLV carries TLS facts taken from
/// `data` (fields split at 0xff bytes: the client's common name, the
/// served certificate's signature and key algorithm, SNI, ALPN; the first byte picks the
/// version and whether a certificate is present), reads it back with
/// `ppp`, and checks that every sub-TLV says what was written (cut to
/// its bound). Returns what differs.
pub fn proxy_v2_ssl_roundtrip(data: &[u8]) -> Result<(), String> {
    let mut parts = data.split(|&b| b == 0xff);
    let flags = parts.next().and_then(|p| p.first().copied()).unwrap_or(0);
    let mut text = || {
        parts
            .next()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    };
    let (cn, sig, key, sni, alpn) = (text(), text(), text(), text(), text());
    let cert = (flags & 1 == 1).then(|| {
        std::sync::Arc::new(tern_tls::ClientCert {
            subject: String::new(),
            common_name: Some(cn.clone()),
            sha256: String::new(),
            chain: Vec::new(),
        })
    });
    let tls = tern_tls::Negotiated {
        version: if flags & 2 == 2 { "TLSv1.2" } else { "TLSv1.3" },
        cipher: "TLS_AES_128_GCM_SHA256".into(),
        sni: (!sni.is_empty()).then_some(sni),
        alpn: (!alpn.is_empty()).then_some(alpn),
        resumed: flags & 4 == 4,
        client_cert: cert.clone(),
        ..Default::default()
    };
    // The served certificate's names, as the listener reads them from it.
    let served = tern_tls::CertAlgorithms {
        sig_alg: sig.clone(),
        key_alg: (!key.is_empty()).then(|| key.clone()),
    };
    let header = crate::front::proxy_header::encode_with(
        crate::config::ProxyProtocol::V2,
        SocketAddr::from(([192, 0, 2, 1], 1)),
        SocketAddr::from(([192, 0, 2, 2], 2)),
        &tls,
        Some(&served),
        None,
    );
    let parsed = ppp::v2::Header::try_from(&header[..]).map_err(|e| e.to_string())?;
    let mut ssl = None;
    for tlv in parsed.tlvs() {
        let tlv = tlv.map_err(|e| e.to_string())?;
        if tlv.kind == u8::from(ppp::v2::Type::SSL) {
            ssl = Some(tlv.value.to_vec());
        }
    }
    let Some(ssl) = ssl else {
        // Only a header past 64 KiB falls back to addresses alone.
        return if header.len() > 60_000 || data.len() > 60_000 {
            Ok(())
        } else {
            Err("no SSL TLV".into())
        };
    };
    if ssl != crate::front::proxy_header::ssl_tlv(&tls, Some(&served)) {
        return Err("the SSL TLV read back differs from the one written".into());
    }
    let verify = ssl.get(1..5).ok_or("SSL TLV shorter than 5 bytes")?;
    if (verify == [0, 0, 0, 0]) != cert.is_some() {
        return Err(format!(
            "verify {verify:?} with a certificate: {}",
            cert.is_some()
        ));
    }
    let mut rest = &ssl[5..];
    while !rest.is_empty() {
        let (&kind, after) = rest.split_first().ok_or("truncated sub-TLV")?;
        let len = after
            .get(..2)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
            .ok_or("truncated sub-TLV length")?;
        let value = after.get(2..2 + len).ok_or("sub-TLV past the TLV's end")?;
        let want: &str = match kind {
            0x21 => tls.version,
            0x22 => &cn,
            0x23 => tern_tls::iana::openssl_suite_name(&tls.cipher),
            0x24 => &sig,
            0x25 => &key,
            other => return Err(format!("unknown sub-TLV {other:#x}")),
        };
        if !want.as_bytes().starts_with(value) || value.is_empty() {
            return Err(format!("sub-TLV {kind:#x} says {value:?}, not {want:?}"));
        }
        rest = &after[2 + len..];
    }
    Ok(())
}

/// Reads what tern logs and forwards about a client certificate from any
/// DER bytes (x509-parser on input webpki has accepted; here on anything).
pub fn client_cert(der: &[u8]) -> Option<tern_tls::ClientCert> {
    let chain = [rustls::pki_types::CertificateDer::from(der)];
    tern_tls::ClientCert::from_chain(&chain)
}

/// Reads the algorithm names the PROXY v2 SSL TLV gives for tern's own
/// certificate, from any DER bytes.
pub fn cert_algorithms(der: &[u8]) -> Option<tern_tls::CertAlgorithms> {
    tern_tls::CertAlgorithms::of(der)
}

/// Reads a backend's gRPC health answer (a length-prefixed
/// HealthCheckResponse) as a gRPC health check does: a status or nothing,
/// never a panic.
pub fn grpc_health(body: &[u8]) -> Option<u64> {
    crate::upstream::health_grpc::serving_status(body)
}

/// Loads a TOML configuration from `text` as `tern serve --config` would
/// (certificate paths resolve against a directory that does not exist, so
/// only files named absolutely are read). Returns the one-line error.
pub fn config_toml(text: &str) -> Result<(), String> {
    let overrides = crate::config::GlobalOptions::default();
    crate::config::file::parse(Path::new("/nonexistent/tern.toml"), text, &overrides)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The client's side of one HTTP/2 connection to tern's real HTTP/2 front
/// end, in memory: the connection preface, then `frames` (any bytes); once
/// tern has ended every stream the client opened (or sent GOAWAY, or wrote
/// nothing for 2 ms, or half a second passed), the client's end of stream. Requests go to a backend on loopback that
/// answers every request `200 ok` and closes. Returns what tern wrote back.
///
/// Panics when the session does not end within 5 s of the client's EOF
/// (time spent waiting for a CPU not counted): a
/// connection whose client has gone must end (bounded by its streams, not
/// by timeouts of tens of seconds).
pub fn h2_session(frames: &[u8]) -> Vec<u8> {
    // A stream tern keeps open (a header block never ended, a body never
    // sent) would hold every such input for the whole wait: after 2 ms
    // without any output the client hangs up.
    h2_fuzz::SESSION.with(|s| s.run(frames, Some(std::time::Duration::from_millis(2))))
}

mod h2_fuzz {
    use std::cell::RefCell;
    use std::net::SocketAddr;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::TlsAcceptor;

    use crate::access_log::{Sink, WorkerLog};
    use crate::config::{self, AccessLogTarget, GlobalOptions, ListenerOptions, LogFormat};
    use crate::control::generation::Generation;
    use crate::exchange::{ConnCtx, ListenerCtx, WorkerCtx};
    use crate::upstream::Backends;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    /// The longest a client waits for tern to answer its streams.
    const PATIENCE: Duration = Duration::from_millis(500);

    thread_local! {
        pub(super) static SESSION: Session = Session::new();
    }

    pub(super) struct Session {
        runtime: tokio::runtime::Runtime,
        local: tokio::task::LocalSet,
        listener: Rc<ListenerCtx>,
        worker: Rc<WorkerCtx>,
        // Keeps the shutdown channel open (tern is not shutting down).
        _shutdown: tokio::sync::watch::Sender<bool>,
    }

    impl Session {
        fn new() -> Session {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime for the fuzz target");
            let local = tokio::task::LocalSet::new();
            let backend = local.block_on(&runtime, start_backend());
            let listener_options = ListenerOptions {
                listen: Some("127.0.0.1:0".into()),
                backends: vec![backend.to_string()],
                ..ListenerOptions::default()
            };
            let config = config::from_options(&GlobalOptions::default(), &listener_options)
                .expect("the fuzz target's configuration");
            let generation = Generation::build(&config, None, &mut None, &mut Default::default())
                .expect("the fuzz target's listener");
            let l = &generation.listeners[0];
            let listener = Rc::new(ListenerCtx {
                config: l.config.clone(),
                acceptor: TlsAcceptor::from(l.tls.clone()),
                by_name: l.by_name.clone(),
                upstreams: Rc::new(
                    generation
                        .upstreams
                        .iter()
                        .map(|u| Backends::new(u.clone(), 4))
                        .collect(),
                ),
                default_upstream: l.default_upstream,
                alt_svc: None,
            });
            let sink = Sink::open(&AccessLogTarget::Off, LogFormat::Text).expect("no access log");
            let (shutdown_tx, shutdown) = tokio::sync::watch::channel(false);
            let worker = Rc::new(WorkerCtx {
                metrics: Default::default(),
                log: WorkerLog::new(sink),
                shutdown,
                clients: Default::default(),
            });
            Session {
                runtime,
                local,
                listener,
                worker,
                _shutdown: shutdown_tx,
            }
        }

        /// One session; with `quiet`, the client also hangs up once tern
        /// has written nothing for that long.
        pub(super) fn run(&self, frames: &[u8], quiet: Option<Duration>) -> Vec<u8> {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let listener = self.listener.clone();
            let worker = self.worker.clone();
            let mut input = PREFACE.to_vec();
            input.extend_from_slice(frames);
            let session = async move {
                let serve = tokio::task::spawn_local(async move {
                    let ctx = ConnCtx::new(
                        SocketAddr::from(([192, 0, 2, 1], 4711)),
                        tern_tls::Negotiated {
                            alpn: Some("h2".into()),
                            sni: Some("localhost".into()),
                            ..Default::default()
                        },
                        0,
                        &listener,
                        &worker,
                    );
                    crate::front::h2::serve(server, &ctx).await;
                });
                let (mut read, mut write) = tokio::io::split(client);
                let out = Rc::new(RefCell::new(Vec::new()));
                let reader = {
                    let out = out.clone();
                    tokio::task::spawn_local(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        while let Ok(n) = read.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            out.borrow_mut().extend_from_slice(&buf[..n]);
                        }
                    })
                };
                // tern may stop reading (or close) before taking it all.
                let _ = tokio::time::timeout(PATIENCE, write.write_all(&input)).await;
                // Let the exchanges run (yielding: the IO driver is polled
                // between tasks) until tern has ended every stream the
                // client opened and did not reset, or sent GOAWAY.
                let opened = client_streams(&input[PREFACE.len()..]);
                let started = Instant::now();
                let (mut seen, mut last_change) = (0, started);
                while !serve.is_finished()
                    && started.elapsed() < PATIENCE
                    && !answered(&opened, &out.borrow())
                {
                    tokio::task::yield_now().await;
                    let now = out.borrow().len();
                    if now != seen {
                        (seen, last_change) = (now, Instant::now());
                    } else if quiet.is_some_and(|q| last_change.elapsed() >= q) {
                        break;
                    }
                }
                let _ = write.shutdown().await;
                let _ = serve.await;
                drop(write);
                let _ = reader.await;
                out.take()
            };
            // (The timer is made inside the runtime.) Time this thread
            // spent runnable but not running (a loaded machine, a niced
            // fuzzer) does not count: a session starved of CPU for seconds
            // is not a session that hangs.
            self.local.block_on(&self.runtime, async {
                let mut session = std::pin::pin!(session);
                let (t0, delay0) = (Instant::now(), run_delay());
                let mut deadline = tokio::time::Instant::now() + SESSION_LIMIT;
                loop {
                    match tokio::time::timeout_at(deadline, session.as_mut()).await {
                        Ok(out) => break out,
                        Err(_) => {
                            let starved = run_delay().saturating_sub(delay0);
                            let used = t0.elapsed().saturating_sub(starved);
                            assert!(
                                used < SESSION_LIMIT,
                                "the HTTP/2 session did not end within 5 s of the client's EOF \
                                 ({starved:?} of waiting for a CPU not counted)"
                            );
                            deadline = tokio::time::Instant::now() + (SESSION_LIMIT - used);
                        }
                    }
                }
            })
        }
    }

    /// How long a session may take once the client has gone.
    const SESSION_LIMIT: Duration = Duration::from_secs(5);

    /// Time this thread has spent waiting for a CPU (runnable, not
    /// running), from /proc/thread-self/schedstat; zero where unreadable.
    fn run_delay() -> Duration {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
            .map_or(Duration::ZERO, Duration::from_nanos)
    }

    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    const GOAWAY: u8 = 7;
    const END_STREAM: u8 = 0x1;

    /// (type, flags, stream) of each whole frame in `bytes`.
    fn frames(bytes: &[u8]) -> impl Iterator<Item = (u8, u8, u32)> + '_ {
        let mut rest = bytes;
        std::iter::from_fn(move || {
            if rest.len() < 9 {
                return None;
            }
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
            let frame = (rest[3], rest[4], stream);
            rest = rest.get(9 + len..).unwrap_or(&[]);
            Some(frame)
        })
    }

    /// Streams the client opened with HEADERS and did not reset itself.
    fn client_streams(input: &[u8]) -> Vec<u32> {
        let mut opened: Vec<u32> = Vec::new();
        for (kind, _, stream) in frames(input) {
            match kind {
                HEADERS if !opened.contains(&stream) => opened.push(stream),
                RST_STREAM => opened.retain(|s| *s != stream),
                _ => {}
            }
        }
        opened
    }

    /// Whether tern's output ends every one of `opened`, or says GOAWAY.
    fn answered(opened: &[u32], out: &[u8]) -> bool {
        let mut pending = opened.to_vec();
        for (kind, flags, stream) in frames(out) {
            if kind == GOAWAY {
                return true;
            }
            if kind == RST_STREAM || flags & END_STREAM != 0 {
                pending.retain(|s| *s != stream);
            }
        }
        pending.is_empty()
    }

    /// An HTTP/1.1 backend answering each request head with `200 ok` and
    /// closing; runs on the session's LocalSet.
    async fn start_backend() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fuzz backend");
        let addr = listener.local_addr().expect("fuzz backend address");
        tokio::task::spawn_local(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::task::spawn_local(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 20 {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = tcp
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        addr
    }
}

/// Finds a cookie in a `Cookie` field as the affinity policies do: the
/// bytes before the first NUL name the cookie (lossy UTF-8), the rest is
/// the field. Checks that a value found is a slice of the field.
pub fn cookie(data: &[u8]) -> Option<&[u8]> {
    let split = data.iter().position(|&b| b == 0).unwrap_or(0);
    let (name, field) = data.split_at(split);
    let field = field.get(1..).unwrap_or(&[]);
    let name = String::from_utf8_lossy(name);
    let value = crate::upstream::cookie(field, &name)?;
    let inside = field.as_ptr_range();
    assert!(inside.contains(&value.as_ptr()) || value.is_empty());
    Some(value)
}

#[cfg(test)]
mod tests {
    /// The fuzz target's check holds for the seeds, names past the
    /// sub-TLV bound, and a few thousand pseudo-random inputs (here, where
    /// cargo-fuzz may not be installed).
    #[test]
    fn proxy_v2_ssl_roundtrip_holds() {
        let long = format!("\x01{}\u{ff}x", "n".repeat(5000));
        let mut inputs: Vec<Vec<u8>> = vec![
            b"\x01alice\xffecdsa-with-SHA256\xffid-ecPublicKey\xfflocalhost\xffh2".to_vec(),
            b"\x06\xff\xff\xff\xff".to_vec(),
            long.into_bytes(),
            Vec::new(),
        ];
        let mut x: u32 = 12345;
        for _ in 0..3000 {
            let len = (x % 64) as usize;
            let mut v = Vec::with_capacity(len);
            for _ in 0..len {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                v.push(if x % 7 == 0 { 0xff } else { (x >> 16) as u8 });
            }
            inputs.push(v);
        }
        for input in inputs {
            if let Err(e) = super::proxy_v2_ssl_roundtrip(&input) {
                panic!("{input:?}: {e}");
            }
        }
        assert!(super::client_cert(b"\x30\x03abc").is_some_and(|c| c.subject.is_empty()));
    }
    /// The harness reaches the backend: a GET gets its `200 ok`.
    #[test]
    fn h2_session_serves_a_get_from_the_backend() {
        fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
            let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
            f.extend_from_slice(&[kind, flags]);
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(payload);
            f
        }
        let get = b"\x82\x87\x84\x01\x09localhost";
        let mut input = frame(4, 0, 0, &[]);
        input.extend(frame(1, 0x5, 1, get));
        // No quiet cut-off: the test waits for the answer, however loaded
        // the machine.
        let out = super::h2_fuzz::SESSION.with(|s| s.run(&input, None));
        let mut frames = Vec::new();
        let mut rest = &out[..];
        while rest.len() >= 9 {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            frames.push((rest[3], rest[9..9 + len].to_vec()));
            rest = &rest[9 + len..];
        }
        assert!(
            frames.iter().any(|(kind, _)| *kind == 1),
            "no HEADERS: {frames:?}"
        );
        assert!(
            frames
                .iter()
                .any(|(kind, payload)| *kind == 0 && payload == b"ok"),
            "no DATA \"ok\": {frames:?}"
        );
    }
}
