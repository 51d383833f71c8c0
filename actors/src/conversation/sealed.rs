//! What the registry keeps of an identity whose actor rests: its cache as one block of bytes
//! (MessagePack), opened again when the identity's next actor starts.
//!
//! A resting cache is kept for the idle timeout (minutes), so a server holds one for every
//! person it heard from lately: at 1,000,000 people every byte and every allocation of it is
//! a megabyte. Kept as the actor held it, a cache is some ten blocks of the heap (the
//! identity, its conversation, the history and each message's text), each with the
//! allocator's rounding, scattered among blocks freed around them. Sealed, a person who wrote
//! once is one block of about 460 bytes, and the heap per resting person fell from 0.82 to
//! 0.60 KiB (`idle_identities --inbound`). Erlang does the same for a hibernating process: it
//! compacts the process's heap into one block.
//!
//! Sealing costs once per rest and opening once per wake-up, on the registry's turn. Opening a
//! cache of some forty kept messages took 11 µs in a tight loop (release build; a third of it
//! parsing the messages' times) and 40–50 µs on a streamed turn that wakes a rested actor
//! (`stream_latency`'s `thaw` span: its memory is cold by then).

use super::context::Context;
use crate::changes::Change;

/// A cache sealed into one block.
pub(crate) struct Sealed(Box<[u8]>);

impl Sealed {
    /// Seals `context`; `None` when it cannot be encoded (never expected: the next actor then
    /// reads the identity afresh).
    pub(crate) fn seal(context: &Context) -> Option<Self> {
        match rmp_serde::to_vec(context) {
            Ok(bytes) => Some(Self(bytes.into_boxed_slice())),
            Err(error) => {
                tracing::warn!(%error, "a resting cache could not be sealed; it is dropped");
                None
            }
        }
    }

    /// The cache again; `None` when it cannot be decoded (never expected: the next actor then
    /// reads the identity afresh).
    pub(crate) fn open(&self) -> Option<Context> {
        rmp_serde::from_slice(&self.0)
            .inspect_err(|error| {
                tracing::warn!(%error, "a resting cache could not be opened; it is read afresh");
            })
            .ok()
    }

    /// Applies `change`; answers `false` when the cache is to be dropped.
    ///
    /// A change that touches no cache leaves the block as it is, and the messages of one
    /// identity are applied as [`Context::changed`] does. Any other change drops the cache:
    /// the identity itself changed, or an administrator changed a channel or the assistants
    /// of the workspace. Applying those would open every resting cache of the workspace in
    /// the registry's turn (seconds at 1,000,000 people); dropped, each person's next turn
    /// reads the identity once more, as after the idle timeout.
    pub(crate) fn changed(&mut self, change: &Change) -> bool {
        if Context::untouched_by(change) {
            return true;
        }
        if !matches!(change, Change::Messages { .. }) {
            return false;
        }
        let Some(mut context) = self.open() else {
            return false;
        };
        if !context.changed(change) {
            return false;
        }
        match Self::seal(&context) {
            Some(sealed) => {
                *self = sealed;
                true
            }
            None => false,
        }
    }

    /// Its size in bytes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests;
