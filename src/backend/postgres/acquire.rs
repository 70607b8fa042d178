//! Acquisitions: a holder's reentry on its own session; a first acquisition's try on the
//! least busy session; a waiting one's statement in the server's lock queue, on a session
//! of its own until the lock is granted, the wait's time is up, or its acquirer leaves (a
//! cancel); then, for a lock taken unless recorded, the record or the mark of its work.

use std::sync::Arc;

use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::choose::Share;
use super::mode::Mode;
use super::records::{finish, held_for_other_work};
use super::session::Holder;
use super::sessions::Found;
use super::take::{attempt, take_on, How, Took, REENTRY_WAIT};
use super::wait::wait_in_server;
use super::Inner;
use crate::backend::{AcquireArgs, Attempt};
use crate::error::BackendError;
use crate::kind::LockKind;

pub(super) async fn acquire(inner: Arc<Inner>, args: AcquireArgs) -> Result<Attempt, BackendError> {
    let mode = Mode::of(args.kind)?;
    let (key, holder) = Holder::of(&args.key, &args.owner);
    let fenced = args.kind == LockKind::Fenced;
    if fenced || args.unless_recorded {
        inner.tables.ensure(inner.sessions.control()).await?;
    }
    // A re-sent acquisition that already counted, or a reentry: on the holder's session.
    if let Found::Held(session) = inner.sessions.find(key, &holder) {
        let counted = session
            .state()
            .hold(key, &holder)
            .map(|hold| hold.count(mode));
        match counted {
            Some(count) if count == args.expected + 1 => {
                return answer_again(&inner, &args, fenced).await;
            }
            Some(count) if count == args.expected && count > 0 => {
                // A reentry waits as a statement would, so that the server lets it past a
                // waiter it would otherwise hold back (a reader's reentry behind a waiting
                // writer): what the session holds goes before its waiters.
                session.keep(key, &holder, mode);
                let took = take_on(
                    &inner,
                    &session,
                    key,
                    &holder,
                    mode,
                    &args,
                    fenced,
                    How::Wait(REENTRY_WAIT),
                )
                .await?;
                return Ok(attempt(took));
            }
            _ => {}
        }
    }
    if args.expected > 0 {
        return Ok(Attempt::Lost);
    }
    let waits = args.waits && !args.wait_left.is_zero();
    let until = Instant::now() + args.wait_left;
    // A waiting acquisition that names no work goes straight to the server's queue; one
    // that names its work first looks whether the lock is held for other work.
    if !waits || args.work.is_some() {
        if let Some(took) = try_first(&inner, key, &holder, mode, &args, fenced).await? {
            return finish(&inner, key, &holder, mode, &args, took).await;
        }
        if let Some(work) = &args.work {
            if held_for_other_work(&inner, key, &args, work).await? {
                return Ok(Attempt::HeldForOtherWork);
            }
        }
        if !waits {
            return Ok(Attempt::Busy(None));
        }
    }
    match wait_in_server(&inner, key, &holder, mode, &args, fenced, until).await? {
        Took::Nothing => Ok(Attempt::Busy(None)),
        took => finish(&inner, key, &holder, mode, &args, took).await,
    }
}

/// The answer to an acquisition that already took effect: acquired, with a fenced lock's
/// token as it is now.
async fn answer_again(
    inner: &Inner,
    args: &AcquireArgs,
    fenced: bool,
) -> Result<Attempt, BackendError> {
    if !fenced {
        return Ok(Attempt::Acquired);
    }
    let token: Option<i64> = sqlx::query_scalar(&inner.tables.token_of)
        .bind(args.key.as_str())
        .fetch_optional(inner.sessions.control())
        .await
        .map_err(|error| BackendError::with_source("could not read a fencing token", error))?;
    Ok(Attempt::Fenced(token.unwrap_or(0).max(0) as u64))
}

/// A first acquisition's try, on a session that holds nothing of the key for another
/// holder. `None`: busy (or every session holds it for other holders of this process).
async fn try_first(
    inner: &Inner,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    args: &AcquireArgs,
    fenced: bool,
) -> Result<Option<Took>, BackendError> {
    let Some((session, share)) = inner.sessions.for_try(key, holder, mode).await? else {
        return Ok(None);
    };
    let how = match share {
        Share::Fresh => How::Try,
        // A writer's read on its own session waits as a reentry does.
        Share::Own => How::Wait(REENTRY_WAIT),
        Share::Readers => How::JoinReaders,
    };
    match take_on(inner, &session, key, holder, mode, args, fenced, how).await? {
        Took::Nothing => Ok(None),
        took => Ok(Some(took)),
    }
}
