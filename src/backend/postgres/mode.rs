//! The advisory lock modes the kinds map to: exclusive (plain, write, fenced) and shared
//! (read).

use crate::error::BackendError;
use crate::kind::LockKind;

/// How a key is held: exclusively or shared (a read lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Exclusive,
    Shared,
}

impl Mode {
    /// The mode of a kind this backend stores.
    pub(super) fn of(kind: LockKind) -> Result<Mode, BackendError> {
        match kind {
            LockKind::Plain | LockKind::Write | LockKind::Fenced => Ok(Mode::Exclusive),
            LockKind::Read => Ok(Mode::Shared),
            other => Err(BackendError::new(format!(
                "the postgres lock backend has no {} locks",
                other.name()
            ))),
        }
    }
}
