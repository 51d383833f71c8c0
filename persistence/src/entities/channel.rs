//! A messaging channel (a WhatsApp Business number).

use sea_orm::entity::prelude::*;

use crate::values::Integration;

/// One row of `channels`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "channels")]
pub struct Model {
    /// UUID v7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Owning workspace.
    pub workspace_id: i64,
    /// 3 to 100 characters.
    pub name: String,
    /// Always `waba` for now.
    pub channel_type: String,
    /// How it reaches WhatsApp.
    pub integration: Integration,
    /// Whether it sends and receives.
    pub active: bool,
    /// Channel-specific settings object.
    pub settings: Json,
    /// Meta's phone number id; unique across the installation.
    pub phone_number_id: Option<String>,
    /// Meta's WhatsApp Business Account id (`businessId` on the wire).
    pub business_account_id: Option<String>,
    /// The access token, encrypted at rest; never returned.
    pub access_token_encrypted: Option<String>,
    /// The synced worker, if any.
    pub worker_id: Option<Uuid>,
    /// Token Meta echoes when verifying the webhook.
    pub verify_token: String,
    /// Why Meta refused the credentials (error 190), until they are replaced.
    pub credentials_error: Option<String>,
    /// The number as Meta shows it, verified with the channel's credentials.
    pub display_phone_number: Option<String>,
    /// The business's verified name at Meta.
    pub verified_name: Option<String>,
    /// When it was created.
    pub created_at: DateTimeUtc,
    /// When it last changed.
    pub updated_at: DateTimeUtc,
    /// When it was deleted; a deleted channel is a tombstone that keeps its conversations'
    /// channel id meaningful, invisible to the API.
    pub deleted_at: Option<DateTimeUtc>,
}

/// Relations are expressed through explicit queries.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
