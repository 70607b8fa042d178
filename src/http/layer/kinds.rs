//! Which kind of lock the layer takes: the plain lock, a read-write lock's read or write
//! side, or the side the request's method calls for.

use crate::kind::LockKind;

/// Which kind of lock the layer takes for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayerKinds {
    /// The plain lock, for every request.
    Exclusive,
    /// The read lock, for every request.
    Read,
    /// The write lock, for every request.
    Write,
    /// The read lock for safe methods (GET, HEAD, OPTIONS), the write lock for the others.
    ByMethod,
}

impl LayerKinds {
    pub(crate) fn for_method(self, method: &http::Method) -> LockKind {
        match self {
            LayerKinds::Exclusive => LockKind::Exclusive,
            LayerKinds::Read => LockKind::Read,
            LayerKinds::Write => LockKind::Write,
            LayerKinds::ByMethod => {
                let safe = [http::Method::GET, http::Method::HEAD, http::Method::OPTIONS];
                if safe.contains(method) {
                    LockKind::Read
                } else {
                    LockKind::Write
                }
            }
        }
    }
}
