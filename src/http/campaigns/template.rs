//! A campaign's template checked at Meta (or the sandbox channel's own): it exists in the
//! campaign's language and is approved, every parameter the campaign fills is one of its own and
//! every placeholder gets a value, and a media header's file is at a link the egress policy
//! allows.

use parley_actors::flow::params;
use parley_persistence::ParamsStrategy;
use parley_persistence::entities::channel;
use serde_json::Value;

use super::wanted::Wanted;
use crate::http::AppState;
use crate::http::error::{ApiError, Result};
use crate::http::validation::{Problems, egress_allows};

/// Checks the template at Meta (or the sandbox channel's own) for the channel: it exists (in the language, or in exactly one
/// when none is given), and every parameter the campaign fills is one of its parameters.
pub(super) async fn check_template(
    state: &AppState,
    channel: &channel::Model,
    wanted: &mut Wanted,
) -> Result<()> {
    let fields = &mut wanted.fields;
    let listed = state.actors.channels().list_templates(channel.id).await?;
    let named: Vec<&Value> = listed
        .iter()
        .filter(|t| t["name"] == fields.template_name.as_str())
        .collect();
    if named.is_empty() {
        return Err(ApiError::invalid_field(
            ["templateName"],
            format!(
                "names no template of this channel at Meta: {}",
                fields.template_name
            ),
        ));
    }
    let found = in_language(&named, wanted)?;
    let fields = &wanted.fields;
    // Only an approved template can be sent (a template under review, rejected, paused or
    // disabled at Meta would fail every recipient).
    let status = found["status"].as_str().unwrap_or("UNKNOWN");
    if !status.eq_ignore_ascii_case("APPROVED") {
        return Err(ApiError::invalid_field(
            ["templateName"],
            format!(
                "the template {} ({}) is {status} at Meta; only approved templates can be sent",
                fields.template_name, fields.template_language
            ),
        ));
    }
    parameters_fill(found, wanted)?;
    header_link_allowed(state, wanted)
}

/// A media header's file at a link is one the egress policy allows.
fn header_link_allowed(state: &AppState, wanted: &Wanted) -> Result<()> {
    let file = &wanted.fields.template_parameters[params::MEDIA_HEADER];
    let mut problems = Problems::default();
    if let Some(link) = file["link"].as_str() {
        let hub = state.actors.mcp();
        let at = ["templateParameters", params::MEDIA_HEADER, "link"];
        egress_allows(&mut problems, hub.egress(), at, link);
    }
    problems.finish()
}

/// The version of the template in the campaign's language; without one given, the only
/// version there is (its language becomes the campaign's).
fn in_language<'t>(named: &[&'t Value], wanted: &mut Wanted) -> Result<&'t Value> {
    let fields = &mut wanted.fields;
    if wanted.language_given {
        return named
            .iter()
            .copied()
            .find(|t| t["language"] == fields.template_language.as_str())
            .ok_or_else(|| {
                ApiError::invalid_field(
                    ["templateLanguage"],
                    format!(
                        "the template {} has no {} version",
                        fields.template_name, fields.template_language
                    ),
                )
            });
    }
    match named {
        [only] => {
            fields.template_language = only["language"].as_str().unwrap_or_default().to_owned();
            Ok(only)
        }
        _ => Err(ApiError::invalid_field(
            ["templateLanguage"],
            "is required: the template exists in several languages",
        )),
    }
}

/// Every parameter the campaign fills is one of the template's, and every placeholder of the
/// template gets a value (its expression, or the template's example value).
fn parameters_fill(found: &Value, wanted: &Wanted) -> Result<()> {
    let fields = &wanted.fields;
    let needed = params::needed(found);
    let known: Vec<String> = needed.iter().map(|n| n.name.clone()).collect();
    let mut problems = Problems::default();
    for parameter in &wanted.expressions {
        if !known.contains(parameter) {
            problems.add(
                ["templateParameters", parameter.as_str()],
                format!(
                    "is not a parameter of the template (it has: {})",
                    known.join(", ")
                ),
            );
        }
    }
    let per_person = fields.params_strategy == ParamsStrategy::UseContactAssociation;
    for parameter in &needed {
        let given = wanted.expressions.contains(&parameter.name);
        if let Some(kind) = parameter.file_kind() {
            if !given {
                problems.add(
                    ["templateParameters", parameter.name.as_str()],
                    format!(
                        "is needed by the template's {} header: give the file as \
                         {{\"media_id\": an upload's id}} or {{\"link\": an https link}}",
                        kind.to_ascii_uppercase()
                    ),
                );
            }
            continue;
        }
        let expressed = per_person && given;
        if !expressed && parameter.example.is_none() {
            problems.add(
                ["templateParameters", parameter.name.as_str()],
                "is needed by the template, which has no example value for it: give it a \
                 source expression (and templateParamsStrategy USE_CONTACT_ASSOCIATION)",
            );
        }
    }
    problems.finish()
}
