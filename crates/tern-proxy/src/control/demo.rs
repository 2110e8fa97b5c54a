//! The built-in demo origin: what `tern serve` forwards to when no backend
//! is configured. It answers every request with a small page that shows
//! what tern told it (the forwarding fields), so a first run demonstrates
//! the whole path: TLS in, rewritten HTTP/1.1 out, response back.

use std::fmt::Write as _;
use std::net::SocketAddr;

use tern_http::framing::request_framing;
use tern_http::head::parse_request;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::io::iobuf::IoBuf;

/// Starts the demo origin on 127.0.0.1 (an ephemeral port) in its own
/// thread and returns its address.
pub(crate) fn start() -> std::io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("tern-demo-origin".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = TcpListener::from_std(std_listener) else {
                    return;
                };
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream));
                }
            })
        })?;
    Ok(addr)
}

async fn serve(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = IoBuf::new(4096, 64 * 1024);
    loop {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        let Ok(len) = buf.read_head(&mut stream, 64 * 1024, deadline).await else {
            return;
        };
        let Ok(head) = parse_request(&buf.filled()[..len]) else {
            return;
        };
        // The demo reads no bodies; a request with one ends the connection
        // after the answer.
        let has_body = !matches!(request_framing(&head), Ok(tern_http::BodyFraming::Empty));
        let mut page = String::with_capacity(1024);
        let _ = writeln!(page, "Hello from tern's built-in demo origin.\n");
        let _ = writeln!(
            page,
            "tern terminated TLS and forwarded: {} {}",
            head.method(),
            head.target()
        );
        let _ = writeln!(page, "Fields as this origin received them:");
        for (name, value) in head.fields.iter() {
            let _ = writeln!(page, "  {name}: {}", String::from_utf8_lossy(value));
        }
        let _ = writeln!(
            page,
            "\nPoint tern at a real service with: tern serve --backend HOST:PORT --cert chain.pem --key key.pem"
        );
        let body = if head.is_head() { "" } else { page.as_str() };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n{}\r\n{}",
            page.len(),
            if has_body { "connection: close\r\n" } else { "" },
            body
        );
        if stream.write_all(response.as_bytes()).await.is_err() || has_body {
            return;
        }
        buf.consume(len);
    }
}
