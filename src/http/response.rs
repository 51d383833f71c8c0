//! What more than one resource answers: a message's attachments appear in the conversations'
//! message lists, and their files are served by `/media` and the console alike.

mod attachment;
mod file;

pub(crate) use self::attachment::AttachmentRecord;
pub(crate) use self::file::serve_attachment;
