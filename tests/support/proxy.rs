//! A TCP proxy in front of a server that can stop forwarding bytes without closing any
//! connection: to the client, the server has gone silent (a network partition, a peer
//! that hangs), which it only learns by timing out; or hold back what clients send, to let
//! it through later (a slow link, with the test deciding when the bytes arrive).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Proxy {
    addr: SocketAddr,
    silent: Arc<AtomicBool>,
    hold: Arc<Hold>,
    task: tokio::task::JoinHandle<()>,
}

/// What clients sent while held back, not yet forwarded.
#[derive(Default)]
struct Hold {
    on: AtomicBool,
    held: Mutex<Vec<u8>>,
    release: tokio::sync::Notify,
}

impl Proxy {
    /// Forwards a free loopback port to `127.0.0.1:<target>`.
    pub async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a proxy");
        let addr = listener.local_addr().unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let hold = Arc::new(Hold::default());
        let task = tokio::spawn({
            let (silent, hold) = (silent.clone(), hold.clone());
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        continue;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::spawn(pipe(
                        client_read,
                        server_write,
                        silent.clone(),
                        Some(hold.clone()),
                    ));
                    tokio::spawn(pipe(server_read, client_write, silent.clone(), None));
                }
            }
        });
        Proxy {
            addr,
            silent,
            hold,
            task,
        }
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// From now on, bytes in either direction are read and dropped; connections stay open.
    pub fn go_silent(&self) {
        self.silent.store(true, Ordering::SeqCst);
    }

    /// From now on, what clients send is kept here instead of reaching the server (replies
    /// still come back), until [`let_through`](Self::let_through). For a proxy that carries
    /// one connection (the held bytes of several would mix).
    pub fn hold_back(&self) {
        self.hold.on.store(true, Ordering::SeqCst);
    }

    /// Whether the bytes held back contain `needle` (a command the client sent).
    pub fn holds(&self, needle: &str) -> bool {
        let held = self.hold.held.lock().unwrap();
        held.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    /// Sends what was held back, and forwards as usual from now on.
    pub fn let_through(&self) {
        self.hold.on.store(false, Ordering::SeqCst);
        self.hold.release.notify_one();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
    hold: Option<Arc<Hold>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(read) => Some(read),
            },
            _ = async { hold.as_ref().unwrap().release.notified().await }, if hold.is_some() => None,
        };
        if silent.load(Ordering::SeqCst) {
            continue;
        }
        let mut out = Vec::new();
        if let Some(hold) = &hold {
            let mut held = hold.held.lock().unwrap();
            if let Some(read) = read {
                held.extend_from_slice(&buffer[..read]);
            }
            if hold.on.load(Ordering::SeqCst) {
                continue;
            }
            out = std::mem::take(&mut *held);
        } else if let Some(read) = read {
            out.extend_from_slice(&buffer[..read]);
        }
        if !out.is_empty() && to.write_all(&out).await.is_err() {
            return;
        }
    }
}
