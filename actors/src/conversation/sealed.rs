//! What the registry keeps of an identity whose actor rests: its cache as one block of bytes
//! (MessagePack), opened again when the identity's next actor starts.
//!
//! A resting cache is kept for the idle timeout (minutes), so a server holds one for every
//! person it heard from lately: at 1,000,000 people every byte and every allocation of it is
//! a megabyte. Kept as the actor held it, a cache is some twelve blocks of the heap (the
//! identity, its conversation, the history and each message's text), about 830 bytes for a
//! person who wrote once, with as many again of the allocator's pages pinned by them among
//! blocks freed around them. As one block it is about half that and pins one slot. Erlang
//! does the same for a hibernating process: it compacts the process's heap into one block.
//!
//! Sealing and opening cost a few microseconds, once per rest and once per wake-up.

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

    /// Applies `change` as [`Context::changed`] does, opening the cache only when the change
    /// touches what it holds. Answers `false` when nothing of it stands any more.
    pub(crate) fn changed(&mut self, change: &Change) -> bool {
        if Context::untouched_by(change) {
            return true;
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
