//! A sandbox channel's templates: kept in Parley's database and approved at once, so that
//! campaigns and flows run offline exactly as they do against Meta.

use parley_persistence::{PersistenceError, clock, sandbox_templates};
use serde_json::Value;

use super::ChannelState;
use crate::whatsapp::{GraphError, MetaError};

/// Meta's code for a template name that exists in that language already.
const DUPLICATE_TEMPLATE: i64 = 2_388_024;

/// The channel's templates, in Meta's shape.
pub(super) async fn list(state: &ChannelState) -> Result<Vec<Value>, GraphError> {
    sandbox_templates::list(&state.deps.db, state.channel.id)
        .await
        .map_err(|e| GraphError::Connection(e.to_string()))
}

/// Stores a template (`{name, language, category, components}`), approved.
pub(super) async fn create(state: &ChannelState, body: &Value) -> Result<Value, GraphError> {
    let text = |key: &str| body[key].as_str().unwrap_or_default().to_owned();
    let created = sandbox_templates::create(
        &state.deps.db,
        state.channel.id,
        &text("name"),
        &text("language"),
        &text("category"),
        body["components"].clone(),
        clock::now(),
    )
    .await;
    match created {
        Ok(template) => Ok(
            serde_json::json!({"id": template["id"], "status": "APPROVED",
                                              "category": template["category"]}),
        ),
        Err(PersistenceError::Conflict(_)) => Err(GraphError::Api(MetaError {
            code: Some(DUPLICATE_TEMPLATE),
            message: "Content in this language already exists".to_owned(),
            title: None,
            details: None,
            http_status: Some(400),
        })),
        Err(error) => Err(GraphError::Connection(error.to_string())),
    }
}
