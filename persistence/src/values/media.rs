//! The values of media: what kind of file an attachment is, and where its fetch stands.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

string_values! {
    /// What kind of file an attachment is (WhatsApp's message types that carry a file).
    MediaKind {
        /// A picture (JPEG or PNG).
        Image = "image",
        /// A voice note or an audio file.
        Audio = "audio",
        /// A video.
        Video = "video",
        /// A document (PDF, office files, text).
        Document = "document",
        /// A sticker (WebP).
        Sticker = "sticker",
    }
}

string_values! {
    /// Where an attachment's file stands.
    AttachmentStatus {
        /// Not fetched yet: the media worker fetches it at `next_attempt_at`.
        Pending = "pending",
        /// Kept in the media store under `storage_key`.
        Stored = "stored",
        /// Never to be fetched: `failure` says why (`expired`, `sha256_mismatch`, `too_large`, …).
        Failed = "failed",
    }
}
