//! Where the extractors find a [`LockManager`] in the router's state.

use axum::extract::FromRef;

use crate::engine::LockManager;

/// A router state in which the extractors ([`Locked<K>`](crate::extract::Locked)) may find a
/// [`LockManager`].
///
/// It is implemented for every state that gives a manager through axum's
/// [`FromRef`] (a `LockManager` as the state, or a field of a state that derives
/// `FromRef`), and for `()`, the state of a router without one. A state of your own that
/// holds no manager implements it in one line, returning `None`; the extractors then find
/// the manager in the request extensions or the layer's lock:
///
/// ```
/// use tower_lock::extract::LockManagerState;
/// use tower_lock::LockManager;
///
/// #[derive(Clone)]
/// struct AppState {
///     greeting: &'static str,
/// }
///
/// impl LockManagerState for AppState {
///     fn lock_manager(&self) -> Option<LockManager> {
///         None // `.layer(Extension(manager))` or `LockLayer::manager` provide it
///     }
/// }
/// ```
///
/// With the manager in the state (`#[derive(FromRef)]`, from axum's `macros` feature, writes
/// the `impl` below for each field):
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::extract::FromRef;
/// use axum::{routing::post, Router};
/// use tower_lock::extract::{KeySource, Lockable, Locked};
/// use tower_lock::LockManager;
/// # use tower::ServiceExt;
///
/// #[derive(Clone)]
/// struct AppState {
///     locks: LockManager,
///     greeting: &'static str,
/// }
///
/// impl FromRef<AppState> for LockManager {
///     fn from_ref(state: &AppState) -> LockManager {
///         state.locks.clone()
///     }
/// }
/// # struct OrderId(u64);
/// # impl Lockable for OrderId {
/// #     fn source() -> KeySource { KeySource::path("orderId") }
/// #     fn parse(raw: &str) -> Result<Self, String> { raw.parse().map(OrderId).map_err(|e| format!("{e}")) }
/// #     fn lock_name(&self) -> String { format!("order:{}", self.0) }
/// # }
///
/// async fn refund(Locked(order): Locked<OrderId>) -> String {
///     format!("refunded order {}", order.0)
/// }
///
/// let state = AppState { locks: LockManager::memory(), greeting: "hi" };
/// let app = Router::new()
///     .route("/orders/{orderId}/refund", post(refund))
///     .with_state(state);
/// # let response = app.oneshot(http::Request::post("/orders/7/refund").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`Locked<_>` cannot look for a `LockManager` in the state `{Self}`",
    label = "the router's state",
    note = "put a `LockManager` in the state and derive `FromRef` (or implement \
            `FromRef<{Self}> for LockManager`), or implement `LockManagerState` for `{Self}` \
            returning `None` to rely on `.layer(Extension(manager))` or `LockLayer::manager`"
)]
pub trait LockManagerState {
    /// The state's manager, if it has one.
    fn lock_manager(&self) -> Option<LockManager>;
}

impl LockManagerState for () {
    fn lock_manager(&self) -> Option<LockManager> {
        None
    }
}

impl<S> LockManagerState for S
where
    LockManager: FromRef<S>,
{
    fn lock_manager(&self) -> Option<LockManager> {
        Some(LockManager::from_ref(self))
    }
}
