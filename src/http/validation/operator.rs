//! An operator to invite, read the same way from the API's body and the console's form.

use parley_persistence::PersistenceError;
use parley_persistence::operators::NewOperator;

use super::Problems;
use crate::domain::{Email, Name};
use crate::http::error::ApiError;

/// `raw`, when it is a role (`agent` or `supervisor`); the problem otherwise.
pub(crate) fn operator_role(problems: &mut Problems, raw: Option<&str>) -> Option<String> {
    match raw {
        None => None,
        Some(r @ ("agent" | "supervisor")) => Some(r.to_owned()),
        Some(_) => {
            problems.add(["role"], "must be agent or supervisor");
            None
        }
    }
}

/// The operator `email` (required), `name` (the address's local part when absent) and `role`
/// (`agent` when absent) describe, in `workspace_id`; every problem at once otherwise.
///
/// # Errors
/// 400 naming each field that is wrong.
pub(crate) fn new_operator(
    workspace_id: i64,
    email: Option<&str>,
    name: Option<&str>,
    role: Option<&str>,
) -> Result<NewOperator, ApiError> {
    let mut problems = Problems::default();
    let email = match email {
        Some(raw) => problems.parse(["email"], Email::try_from(raw)),
        None => {
            problems.add(["email"], "is required");
            None
        }
    };
    let name = name.and_then(|raw| problems.parse(["name"], Name::try_from(raw)));
    let role = operator_role(&mut problems, role).unwrap_or_else(|| "agent".to_owned());
    problems.finish()?;
    let Some(email) = email else {
        return Err(ApiError::invalid_field(["email"], "is required"));
    };
    let email = email.as_str().to_lowercase();
    let name = name.map_or_else(
        || email.split('@').next().unwrap_or_default().to_owned(),
        |n| n.into_inner(),
    );
    Ok(NewOperator {
        workspace_id,
        email,
        name,
        role,
    })
}

/// The answer to an invitation the database refused: 409 for an address the workspace has.
pub(crate) fn invitation_refused(error: PersistenceError) -> ApiError {
    match error {
        PersistenceError::Conflict(_) => ApiError::Conflict(
            "This workspace already has an operator with that e-mail address".to_owned(),
        ),
        other => other.into(),
    }
}
