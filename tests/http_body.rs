//! Request bodies and the lock: by default the layer reads the body before it asks for the
//! lock, so a client sending slowly holds nothing; too large a body is a 413 and too slow
//! a one a 408, without the lock; `stream_body` hands the body over as it arrives.

mod support;

use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use axum::Router;
use support::http::{read, request, serve};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

/// Sends the head of a POST with a body of `length` bytes and its first `first` bytes.
async fn start_upload(
    addr: std::net::SocketAddr,
    path: &str,
    length: usize,
    first: &[u8],
) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(first).await.unwrap();
    stream
}

fn app(layer: LockLayer, entered: mpsc::UnboundedSender<usize>) -> Router {
    Router::new()
        .route(
            "/orders/{orderId}",
            post(move |body: Bytes| {
                let _ = entered.send(body.len());
                async move { format!("got {} bytes", body.len()) }
            }),
        )
        .route_layer(layer)
}

/// A slow upload holds no lock while it arrives: a competing request for the same order
/// is served before the slow body is even complete (it used to wait behind the upload,
/// here until its wait ran out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_holds_no_lock_while_it_arrives() {
    let locks = LockManager::memory();
    let (entered, mut handled) = mpsc::unbounded_channel();
    let addr = serve(app(
        LockLayer::by_path_param("orderId")
            .wait(Duration::from_secs(5))
            .manager(locks.clone()),
        entered,
    ))
    .await;
    let mut slow = start_upload(addr, "/orders/1", 10, b"12345").await;
    let competitor = request(addr, "POST", "/orders/1", &[]).await;
    assert_eq!(competitor.status, 200, "{competitor:?}");
    assert_eq!(handled.recv().await, Some(0), "the competitor ran first");
    slow.write_all(b"67890").await.unwrap();
    let slow = read(slow).await;
    assert_eq!((slow.status, slow.body.as_str()), (200, "got 10 bytes"));
    support::nothing_left_behind(&locks).await;
}

/// A body over the limit is a 413 and one that stalls a 408; neither takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_or_too_slow_bodies_are_refused_without_the_lock() {
    let locks = LockManager::memory();
    let (entered, _handled) = mpsc::unbounded_channel();
    let addr = serve(app(
        LockLayer::by_path_param("orderId")
            .body_limit(8)
            .body_timeout(Duration::from_millis(200))
            .manager(locks.clone()),
        entered,
    ))
    .await;
    // Declared too large: refused before anything is read.
    let declared = read(start_upload(addr, "/orders/1", 9, b"123456789").await).await;
    assert_eq!(declared.status, 413, "{declared:?}");
    assert!(declared.body.contains("8 bytes"), "{declared:?}");
    // Stalls: the 408 comes while the client still holds the rest back.
    let stalled = start_upload(addr, "/orders/1", 8, b"1234").await;
    let stalled = read(stalled).await;
    assert_eq!(stalled.status, 408, "{stalled:?}");
    support::nothing_left_behind(&locks).await;
    // The order is free: nothing was held meanwhile.
    let next = request(addr, "POST", "/orders/1", &[]).await;
    assert_eq!(next.status, 200);
}

/// With `stream_body`, the handler runs under the lock while the body still arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_arrives_under_the_lock() {
    let locks = LockManager::memory();
    let (entered_tx, mut entered) = mpsc::unbounded_channel::<()>();
    let app = Router::new()
        .route(
            "/orders/{orderId}",
            post(move |body: axum::body::Body| {
                let _ = entered_tx.send(());
                async move {
                    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                    format!("got {} bytes", bytes.len())
                }
            }),
        )
        .route_layer(
            LockLayer::by_path_param("orderId")
                .stream_body()
                .manager(locks.clone()),
        );
    let addr = serve(app).await;
    let mut upload = start_upload(addr, "/orders/1", 10, b"12345").await;
    entered.recv().await.unwrap();
    assert!(
        locks.lock("orderId:1").try_acquire().await.is_err(),
        "held while the body arrives"
    );
    upload.write_all(b"67890").await.unwrap();
    let reply = read(upload).await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "got 10 bytes"));
}

/// A service that is not axum's keeps its own response body type: the layer wraps it
/// (`LockResponseBody<String>` here) without converting it, and answers its own rejections
/// in the same type.
#[tokio::test]
async fn a_non_axum_response_body_passes_through() {
    use http_body_util::BodyExt;
    use tower::{Layer, ServiceExt};
    use tower_lock::layer::LockResponseBody;

    let locks = LockManager::memory();
    let held = locks.clone();
    let inner = tower::service_fn(
        move |request: http::Request<tower_lock::layer::LockRequestBody<String>>| {
            let held = held.clone();
            async move {
                let order = request.headers()["x-order"].to_str().unwrap().to_owned();
                let name = format!("x-order:{order}");
                assert!(
                    held.lock(&name).try_acquire().await.is_err(),
                    "runs under the lock"
                );
                Ok::<_, std::convert::Infallible>(http::Response::new(format!("order {order}")))
            }
        },
    );
    let service = LockLayer::by_header("x-order")
        .manager(locks.clone())
        .layer(inner);

    let request = http::Request::builder()
        .header("x-order", "7")
        .body(String::new())
        .unwrap();
    let response: http::Response<LockResponseBody<String>> =
        service.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "order 7");

    let missing = http::Request::builder().body(String::new()).unwrap();
    let response = service.oneshot(missing).await.unwrap();
    assert_eq!(response.status(), 400);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(
        String::from_utf8_lossy(&body).contains("x-order"),
        "the rejection names the header: {body:?}"
    );
    let again = locks.lock("x-order:7").try_acquire().await;
    assert!(again.is_ok(), "released with the response: {again:?}");
}
