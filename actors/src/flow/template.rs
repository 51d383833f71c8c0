//! A flow's template: the campaign's, found once per run among the channel's templates at
//! Meta (a sandbox channel keeps its own), and how its parameters are filled per recipient.

use parley_persistence::ParamsStrategy;
use parley_persistence::entities::{campaign, channel};
use serde_json::Value;

use super::params::{self, Filling};
use crate::channel::Channels;
use crate::whatsapp::{MetaErrorKind, TemplateRef};

/// Why a flow's template could not be had.
pub(super) enum TemplateProblem {
    /// The flow cannot go on: it ends `error` with this reason.
    Fatal(String),
    /// Meta could not be asked now: try again after a wait.
    Transient(String),
}

/// The campaign's template at Meta (none for a sandbox channel).
pub(super) async fn template_of(
    channels: &Channels,
    campaign: &campaign::Model,
    channel: &channel::Model,
) -> Result<(TemplateRef, Value), TemplateProblem> {
    let template = TemplateRef {
        name_or_id: campaign.template_name.clone(),
        language: campaign.template_language.clone(),
        carousel: false,
    };
    let listed = channels
        .list_templates(channel.id)
        .await
        .map_err(|error| match error {
            error if error.kind() == MetaErrorKind::Credentials => TemplateProblem::Fatal(format!(
                "the channel's credentials are invalid (190): {error}"
            )),
            other => TemplateProblem::Transient(other.to_string()),
        })?;
    let definition = template.find(&listed).cloned().ok_or_else(|| {
        TemplateProblem::Fatal(format!(
            "template {} ({}) does not exist at Meta for this channel",
            campaign.template_name, campaign.template_language
        ))
    })?;
    // Approved when the campaign was saved, it may have been paused or disabled since.
    let status = definition["status"].as_str().unwrap_or("UNKNOWN");
    if !status.eq_ignore_ascii_case("APPROVED") {
        return Err(TemplateProblem::Fatal(format!(
            "template {} ({}) is {status} at Meta; only approved templates can be sent",
            campaign.template_name, campaign.template_language
        )));
    }
    Ok((template, definition))
}

/// How the campaign fills each recipient's parameters.
pub(super) fn filling_of(campaign: &campaign::Model) -> Filling {
    match campaign.params_strategy {
        // Example values for every text; a media header's file is the campaign's either way.
        ParamsStrategy::UseDefault => campaign.template_parameters[params::MEDIA_HEADER]
            .as_object()
            .and_then(|_| {
                let file = &campaign.template_parameters[params::MEDIA_HEADER];
                params::parse_one(params::MEDIA_HEADER, file).ok()
            })
            .map_or(Filling::Defaults, |file| {
                Filling::PerPerson([(params::MEDIA_HEADER.to_owned(), file)].into())
            }),
        ParamsStrategy::UseContactAssociation => {
            let expressions = campaign
                .template_parameters
                .as_object()
                .map(|raw| params::parse_all(raw).unwrap_or_default())
                .unwrap_or_default();
            Filling::PerPerson(expressions)
        }
    }
}
