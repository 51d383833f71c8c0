//! Who is signed in: the [`Console`] every console handler takes, read from the session's row
//! on each request (an operator's, or an admin key's), with what it may do now.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use parley_persistence::operators::sessions::Holder;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::{Ended, SignInFirst, cookie_token, csrf_of};
use crate::domain::{Permission, Permissions};
use crate::http::AppState;
use crate::http::auth::{Caller, caller_of};

/// Who a console session is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::http::console) enum Who {
    /// An admin signed in with a key.
    Key(Uuid),
    /// An operator.
    Operator {
        /// Their id.
        id: Uuid,
        /// Their name.
        name: String,
        /// Whether they supervise (assign others).
        supervisor: bool,
    },
}

/// A signed-in console request: who is looking, and the CSRF token its forms carry.
#[derive(Clone, Debug)]
pub(in crate::http::console) struct Console {
    /// What the session may do, as the API would see it.
    pub(in crate::http::console) caller: Caller,
    /// Who signed in.
    pub(in crate::http::console) who: Who,
    /// The session's CSRF token.
    pub(in crate::http::console) csrf: String,
    /// The workspace's name.
    pub(in crate::http::console) workspace_name: String,
    /// The session's own token (for sign-out).
    pub(in crate::http::console) token: String,
}

impl Console {
    /// Whether the session may act (hand over, reply, pause…), not only look.
    pub(in crate::http::console) fn may_act(&self) -> bool {
        self.caller.permissions.contains(Permission::Write)
    }

    /// Whether the session may assign conversations to others: a supervisor, or a key that
    /// may write.
    pub(in crate::http::console) fn may_supervise(&self) -> bool {
        match &self.who {
            Who::Operator { supervisor, .. } => *supervisor,
            Who::Key(_) => self.may_act(),
        }
    }

    /// The operator signed in, if an operator is.
    pub(in crate::http::console) fn operator_id(&self) -> Option<Uuid> {
        match &self.who {
            Who::Operator { id, .. } => Some(*id),
            Who::Key(_) => None,
        }
    }

    /// Who writes what this session sends, for the history and the events.
    pub(in crate::http::console) fn author(&self) -> Option<parley_actors::whatsapp::Author> {
        match &self.who {
            Who::Operator { id, name, .. } => Some(parley_actors::whatsapp::Author {
                id: *id,
                name: name.clone(),
            }),
            Who::Key(_) => None,
        }
    }

    /// The name the page's header shows.
    pub(in crate::http::console) fn display_name(&self) -> Option<&str> {
        match &self.who {
            Who::Operator { name, .. } => Some(name),
            Who::Key(_) => None,
        }
    }

    /// The holder of this session (for signing out everywhere).
    pub(in crate::http::console) fn holder(&self) -> Holder {
        match &self.who {
            Who::Operator { id, .. } => Holder::Operator(*id),
            Who::Key(id) => Holder::Key(*id),
        }
    }

    /// Whether `presented` is this session's CSRF token.
    pub(in crate::http::console) fn csrf_matches(&self, presented: &str) -> bool {
        bool::from(presented.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

impl FromRequestParts<AppState> for Console {
    type Rejection = SignInFirst;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let htmx = parts.headers.contains_key("hx-request");
        let stream = parts
            .headers
            .get(axum::http::header::ACCEPT)
            .is_some_and(|accept| accept.as_bytes().starts_with(b"text/event-stream"));
        let refuse = |ended| SignInFirst {
            ended,
            htmx,
            stream,
        };
        let token = cookie_token(parts).ok_or(refuse(Ended::None))?;
        let row = state.console.touch(token).await.map_err(refuse)?;
        let signed_in = match Holder::of(&row) {
            Some(Holder::Key(key_id)) => key_holder(state, key_id).await,
            Some(Holder::Operator(id)) => operator_holder(state, id).await,
            None => Ok(None),
        };
        let (caller, who, workspace_name) = match signed_in {
            Ok(Some(found)) => found,
            // A database failure is not a reason to end the session: the next request tries
            // again.
            Err(error) => {
                tracing::warn!(%error, "could not read a console session's holder");
                return Err(refuse(Ended::None));
            }
            Ok(None) => {
                if let Err(error) = state.console.end(token).await {
                    tracing::warn!(%error, "could not end a console session");
                }
                let ended = if row.api_key_id.is_some() {
                    Ended::KeyGone
                } else {
                    Ended::None
                };
                return Err(refuse(ended));
            }
        };
        tracing::Span::current().record("workspace_id", caller.workspace_id);
        Ok(Self {
            caller,
            who,
            csrf: csrf_of(token),
            workspace_name,
            token: token.to_owned(),
        })
    }
}

/// What a key's session may do now: `None` when the key was revoked or expired.
async fn key_holder(
    state: &AppState,
    key_id: Uuid,
) -> Result<Option<(Caller, Who, String)>, crate::http::error::ApiError> {
    let Some(key) = parley_persistence::api_keys::find_by_id(&state.db, key_id).await? else {
        return Ok(None);
    };
    let Some(caller) = caller_of(state, &key.key_hash).await? else {
        return Ok(None);
    };
    let name = workspace_name(state, caller.workspace_id).await?;
    Ok(Some((caller, Who::Key(key_id), name)))
}

/// What an operator's session may do now: `None` when the operator is gone or disabled.
async fn operator_holder(
    state: &AppState,
    id: Uuid,
) -> Result<Option<(Caller, Who, String)>, crate::http::error::ApiError> {
    let Some(operator) = parley_persistence::operators::find_any(&state.db, id).await? else {
        return Ok(None);
    };
    if operator.disabled_at.is_some() || operator.password_hash.is_none() {
        return Ok(None);
    }
    let Some(workspace) =
        parley_persistence::workspaces::find_by_id(&state.db, operator.workspace_id).await?
    else {
        return Ok(None);
    };
    let caller = Caller {
        workspace_id: operator.workspace_id,
        business_id: workspace.business_id,
        user_id: operator.id,
        permissions: Permissions::from_storage("read,write"),
    };
    let who = Who::Operator {
        id: operator.id,
        name: operator.name,
        supervisor: operator.role == "supervisor",
    };
    Ok(Some((caller, who, workspace.name)))
}

/// The name of workspace `id`, for the page's header.
async fn workspace_name(state: &AppState, id: i64) -> Result<String, crate::http::error::ApiError> {
    Ok(parley_persistence::workspaces::find_by_id(&state.db, id)
        .await?
        .map_or_else(|| format!("Workspace {id}"), |w| w.name))
}
