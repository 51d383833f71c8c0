//! Memory of an identity: `GET /memory/from/{identity_id}`, and for integrators
//! `PUT /memory/from/{identity_id}` and `DELETE /memory/from/{identity_id}/{key}`.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_persistence::entities::memory_entry;
use parley_persistence::memory;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::{MemoryKey, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path};
use crate::http::lookup::find_identity;
use crate::http::validation::{Problems, object_or_empty};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Largest stored value, as serialised JSON.
const MAX_VALUE_BYTES: usize = 64 * 1024;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_memory, put_memory))
        .routes(routes!(delete_memory))
}

/// A memory entry as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct MemoryRecord {
    key: String,
    value: Value,
    metadata: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<memory_entry::Model> for MemoryRecord {
    fn from(m: memory_entry::Model) -> Self {
        Self {
            key: m.key,
            value: m.value,
            metadata: m.metadata,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

/// Read what assistants remember about a person.
///
/// Entries are dotted keys (`profile.name`) with a value and metadata.
#[utoipa::path(
    get,
    path = "/memory/from/{identity_id}",
    tag = "memory",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    responses((status = 200, body = Envelope<Vec<MemoryRecord>>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_memory(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
) -> Result<Envelope<Vec<MemoryRecord>>> {
    caller.require(Permission::Read)?;
    let found = find_identity(&state.db, caller.workspace_id, &identity_id).await?;
    let entries = memory::list(&state.db, found.id).await?;
    Ok(Envelope::ok(
        "Memory retrieved successfully",
        entries.into_iter().map(MemoryRecord::from).collect(),
    ))
}

/// A memory entry's value: any JSON but null.
struct MemoryValue;

impl utoipa::PartialSchema for MemoryValue {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        let kinds = [
            Type::String,
            Type::Number,
            Type::Boolean,
            Type::Object,
            Type::Array,
        ];
        ObjectBuilder::new()
            .schema_type(SchemaType::Array(kinds.to_vec()))
            .examples(["Porto"])
            .into()
    }
}

impl utoipa::ToSchema for MemoryValue {}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct PutMemoryBody {
    /// Dotted lower-case segments of letters, digits and `_` (`profile.name`), at most 8.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[a-z0-9_]+(\.[a-z0-9_]+){0,7}$",
        example = "profile.name"
    )]
    key: String,
    /// A string or structured value; not null, at most 64 KiB of JSON.
    #[schema(value_type = MemoryValue)]
    #[serde(default)]
    #[schema(required = true)]
    value: Value,
    /// For example `{"source": "chat", "confidence": 0.9}` (`confidence` from 0 to 1).
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// Remember something about a person.
///
/// The value replaces an entry with the same key.
#[utoipa::path(
    put,
    path = "/memory/from/{identity_id}",
    tag = "memory",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)")),
    request_body = PutMemoryBody,
    responses(
        (status = 200, body = Envelope<MemoryRecord>, description = "Replaced"),
        (status = 201, body = Envelope<MemoryRecord>, description = "Created")),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn put_memory(
    caller: Caller,
    State(state): State<AppState>,
    Path(identity_id): Path<String>,
    Json(body): Json<PutMemoryBody>,
) -> Result<Envelope<MemoryRecord>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let key = problems.parse(["key"], MemoryKey::try_from(body.key.as_str()));
    if body.value.is_null() {
        problems.add(["value"], "is required and must not be null");
    } else if serde_json::to_vec(&body.value).map_or(0, |v| v.len()) > MAX_VALUE_BYTES {
        problems.add(["value"], "must be at most 64 KiB of JSON");
    }
    let mut metadata = object_or_empty(&mut problems, "metadata", body.metadata);
    if let Some(confidence) = metadata.get("confidence")
        && !confidence
            .as_f64()
            .is_some_and(|c| (0.0..=1.0).contains(&c))
    {
        problems.add(
            ["metadata", "confidence"],
            "must be a number between 0 and 1",
        );
    }
    problems.finish()?;
    let key = key.ok_or_else(|| ApiError::invalid_field(["key"], "is required"))?;
    if let Some(map) = metadata.as_object_mut() {
        map.entry("source").or_insert_with(|| json!("api"));
    }

    let found = find_identity(&state.db, caller.workspace_id, &identity_id).await?;
    let (entry, created) = state
        .actors
        .store()
        .remember(
            caller.workspace_id,
            found.id,
            key.as_str(),
            body.value,
            metadata,
        )
        .await?;
    Ok(if created {
        Envelope::created("Memory entry created successfully", entry.into())
    } else {
        Envelope::ok("Memory entry updated successfully", entry.into())
    })
}

/// Forget one memory entry.
///
/// The entry with this key; forgetting one that does not exist is a 404.
#[utoipa::path(
    delete,
    path = "/memory/from/{identity_id}/{key}",
    tag = "memory",
    params(("identity_id" = String, Path, description = "Identity: its id, or a path resolving to one (`external_id`, phone, e-mail)"), ("key" = String, Path, description = "Memory key: dotted lower-case segments (`profile.name`)", pattern = r"^[a-z0-9_]+(\.[a-z0-9_]+){0,7}$", max_length = 200)),
    responses((status = 200, body = Envelope<Value>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_memory(
    caller: Caller,
    State(state): State<AppState>,
    Path((identity_id, key)): Path<(String, String)>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let key = MemoryKey::try_from(key.as_str())
        .map_err(|e| ApiError::invalid_field(["key"], e.to_string()))?;
    let found = find_identity(&state.db, caller.workspace_id, &identity_id).await?;
    if !state
        .actors
        .store()
        .forget(caller.workspace_id, found.id, key.as_str())
        .await?
    {
        return Err(ApiError::NotFound("Memory entry"));
    }
    Ok(Envelope::ok(
        "Memory entry deleted successfully",
        json!({ "key": key.as_str() }),
    ))
}
