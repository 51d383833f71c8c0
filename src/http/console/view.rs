//! What every console page shows around its content, and how values read on a page.

use chrono::{DateTime, Utc};
use parley_persistence::Role;

use super::session::Console;

/// The frame of a page: its section, who is looking, the CSRF token of its forms, and a line
/// saying what the last action did or why it was refused.
#[derive(Clone, Debug)]
pub(super) struct Shell {
    pub(super) section: &'static str,
    /// The workspace's name, for the header.
    pub(super) workspace_name: String,
    pub(super) may_act: bool,
    /// Whether an admin's key signed in (who manages operators).
    pub(super) may_admin: bool,
    /// The operator signed in (`None`: a key's session).
    pub(super) operator_name: Option<String>,
    pub(super) csrf: String,
    pub(super) notice: Option<String>,
    pub(super) problem: Option<String>,
}

impl Shell {
    pub(super) fn new(console: &Console, section: &'static str) -> Self {
        Self {
            section,
            workspace_name: console.workspace_name.clone(),
            may_act: console.may_act(),
            may_admin: console
                .caller
                .permissions
                .contains(crate::domain::Permission::Admin),
            operator_name: console.display_name().map(str::to_owned),
            csrf: console.csrf.clone(),
            notice: None,
            problem: None,
        }
    }

    /// With the sentence of a finished action (from a fixed list: never text from the address).
    pub(super) fn told(mut self, done: Option<&str>, sentences: &[(&str, &str)]) -> Self {
        self.notice = done.and_then(|done| {
            sentences
                .iter()
                .find(|(code, _)| *code == done)
                .map(|(_, sentence)| (*sentence).to_owned())
        });
        self
    }

    /// With why an action was refused.
    pub(super) fn refused(mut self, problem: String) -> Self {
        self.problem = Some(problem);
        self
    }
}

/// The `done` of a page's address: which action just finished (its sentence comes from the
/// page's own list, see [`Shell::told`]).
#[derive(Debug, serde::Deserialize)]
pub(super) struct Done {
    pub(super) done: Option<String>,
}

/// A time as a page shows it: `2026-11-26 05:12 UTC`.
pub(super) fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// An optional time, or a dash.
pub(super) fn when_or_dash(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(|| "—".to_owned(), when)
}

/// `text` cut to `most` characters, with an ellipsis when cut.
pub(super) fn clipped(text: &str, most: usize) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(most).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// Who wrote a message, as a page says it.
pub(super) fn author(role: Role) -> &'static str {
    match role {
        Role::User => "Person",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
        Role::Operator => "Operator",
        Role::System => "Note",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_clipped_with_an_ellipsis_and_short_text_is_not() {
        assert_eq!(clipped("héllo world", 5), "héllo…");
        assert_eq!(clipped("hi", 5), "hi");
    }
}
