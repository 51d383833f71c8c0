//! Mail: an operator's invitation, sent through the configured SMTP relay (`mail.smtp_url`)
//! with lettre. Without a relay nothing is sent: the API's answer carries the link for the
//! admin to pass on.

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::MailConfig;

/// Longest a relay may take to take a mail.
const PATIENCE: Duration = Duration::from_secs(10);

/// Mails `to` their invitation `link`; answers whether the relay took it (never with no
/// relay; a failure is logged, and the link in the answer still works).
pub(crate) async fn invitation(config: &MailConfig, to: &str, link: &str) -> bool {
    let Some(url) = config.smtp_url.as_ref() else {
        return false;
    };
    match send_invitation(url.expose(), config.from.as_deref(), to, link).await {
        Ok(()) => {
            tracing::info!("an operator's invitation was mailed");
            true
        }
        Err(error) => {
            tracing::warn!(%error, "an operator's invitation could not be mailed");
            false
        }
    }
}

async fn send_invitation(
    url: &str,
    from: Option<&str>,
    to: &str,
    link: &str,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let from: Mailbox = from.unwrap_or("Parley <parley@localhost>").parse()?;
    let text = format!(
        "Hello,\n\nyou were invited to answer conversations in a Parley workspace.\n\
         Set your password here (the link works once, for 48 hours):\n\n{link}\n\n\
         If you did not expect this, ignore this mail.\n"
    );
    // A link longer than a mail line travels quoted-printable (lettre's choice), which every
    // mail reader decodes back to one line.
    let message = Message::builder()
        .from(from)
        .to(to.parse()?)
        .subject("You are invited to answer conversations in Parley")
        .header(ContentType::TEXT_PLAIN)
        .body(text)?;
    let relay = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)?
        .timeout(Some(PATIENCE))
        .build();
    relay.send(message).await?;
    Ok(())
}
