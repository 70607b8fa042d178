//! A minimal HTTP/1.1 client over a real TCP connection, and a server on a free port.

use std::net::SocketAddr;

use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Serves `app` on a free loopback port until the test runtime ends.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Opens a connection and sends `method path` with `headers`; returns the open stream.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> TcpStream {
    send_body(addr, method, path, headers, "").await
}

/// [`send`] with a body.
pub async fn send_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// Reads a whole `Connection: close` response.
pub async fn read(mut stream: TcpStream) -> Reply {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect::<Vec<_>>();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// Sends a request and reads the response.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    read(send(addr, method, path, headers).await).await
}

/// What a [`holding`] route reports: a request has entered its handler, and the test lets
/// it finish.
pub struct Holding {
    /// Receives `()` each time a request enters the handler.
    pub entered: tokio::sync::mpsc::UnboundedReceiver<()>,
    /// `notify_one` lets one waiting handler finish.
    pub release: std::sync::Arc<tokio::sync::Notify>,
}

/// A POST route whose handler says it has started, then waits for the test's release before
/// it answers `answer`: a request that holds its lock until the test lets it go.
pub fn holding(answer: &'static str) -> (axum::routing::MethodRouter, Holding) {
    let (entered_tx, entered) = tokio::sync::mpsc::unbounded_channel();
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let handler = {
        let release = release.clone();
        move || {
            let (entered_tx, release) = (entered_tx.clone(), release.clone());
            async move {
                let _ = entered_tx.send(());
                release.notified().await;
                answer
            }
        }
    };
    (axum::routing::post(handler), Holding { entered, release })
}

/// A POST route whose handler says it has started, then never finishes (until its request
/// is dropped): for requests cancelled or aborted mid-handler.
pub fn stalled() -> (
    axum::routing::MethodRouter,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    let (entered_tx, entered) = tokio::sync::mpsc::unbounded_channel();
    let handler = move || {
        let entered_tx = entered_tx.clone();
        async move {
            let _ = entered_tx.send(());
            std::future::pending::<&'static str>().await
        }
    };
    (axum::routing::post(handler), entered)
}
