//! A campaign's body checked once: for a create alone, for a PATCH laid over the campaign it
//! changes. The template itself is checked against Meta by the handler.

use parley_actors::flow::params;
use parley_persistence::campaigns::CampaignFields;
use parley_persistence::entities::campaign;
use parley_persistence::{CampaignStatus, ParamsStrategy};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::domain::within_free_form_limit;
use crate::http::error::{ApiError, FieldError};
use crate::http::validation::{Checked, checked, is_template_language, problem, too_large};

crate::http::openapi::string_schema!(
    /// A fallback chain over `name`, `phone`, `email`, `external_id`, `stage`, `default`,
    /// `metadata.<key>` and `memory.<key>`, separated by commas; the first non-empty value wins.
    SourceExpression,
    pattern = r"^\s*(name|phone|email|external_id|stage|default|(metadata|memory)(\.[^.,]+)*\.[^.,]*[^.,\s])\s*(,\s*(name|phone|email|external_id|stage|default|(metadata|memory)(\.[^.,]+)*\.[^.,]*[^.,\s])\s*)*$",
    example = "name,default"
);

/// The file of a media header (IMAGE, VIDEO or DOCUMENT), the same for every person: an
/// upload's `media_id` or an `https` `link` (exactly one).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // the document's shape; the body is read by `params::parse_one`
pub(crate) struct HeaderFileSource {
    media_id: Option<String>,
    link: Option<String>,
}

/// A template parameter's source: an expression for a text placeholder, or (as `header`) the
/// file of a media header.
pub(crate) struct ParameterSource;

impl utoipa::PartialSchema for ParameterSource {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::OneOfBuilder;
        OneOfBuilder::new()
            .item(<SourceExpression as utoipa::PartialSchema>::schema())
            .item(<HeaderFileSource as utoipa::PartialSchema>::schema())
            .into()
    }
}

impl utoipa::ToSchema for ParameterSource {}

/// Longest campaign name.
const MAX_NAME: usize = 200;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CampaignBody {
    /// The channel whose template the campaign sends; fixed at creation.
    #[schema(value_type = Option<uuid::Uuid>)]
    pub(super) channel_uid: Option<String>,
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    pub(super) name: Option<String>,
    #[serde(default, deserialize_with = "crate::http::validation::present")]
    #[schema(value_type = Option<Object>)]
    pub(super) description: Option<Option<Value>>,
    #[schema(value_type = Option<CampaignStatus>)]
    pub(super) status: Option<String>,
    /// An approved template of the channel.
    #[schema(value_type = Option<String>, min_length = 1)]
    pub(super) template_name: Option<String>,
    /// The template's language (`en_US`); when not given, the template's own.
    #[schema(value_type = Option<String>, pattern = "^[a-z]{2,3}(_[A-Z]{2})?$", example = "en_US")]
    pub(super) template_language: Option<String>,
    #[schema(value_type = Option<ParamsStrategy>)]
    pub(super) template_params_strategy: Option<String>,
    /// Template parameter → source expression (`name`, or a fallback chain `name,default`);
    /// `header` → `{"media_id": …}` or `{"link": …}` for a template with a media header.
    #[schema(value_type = Option<std::collections::HashMap<String, ParameterSource>>)]
    pub(super) template_parameters: Option<Map<String, Value>>,
}

crate::http::openapi::create_body!(
    /// The body of `POST /campaigns`.
    NewCampaignBody = CampaignBody,
    ["channelUid", "name", "status", "templateName", "templateParamsStrategy"]
);

/// The fields a body asks for, laid over `current` for a PATCH, checked but for the template.
pub(super) struct Wanted {
    pub(super) fields: CampaignFields,
    /// Whether the language was given (or kept), rather than left for the template to say.
    pub(super) language_given: bool,
    /// The parameters the campaign fills, each with an expression that parses.
    pub(super) expressions: Vec<String>,
}

impl TryFrom<(&CampaignBody, Option<&campaign::Model>)> for Wanted {
    type Error = ApiError;

    fn try_from(
        (body, current): (&CampaignBody, Option<&campaign::Model>),
    ) -> Result<Self, ApiError> {
        let name = name(body, current);
        let description = description(body, current);
        let status = status(body, current);
        let template_name = template_name(body, current);
        let params_strategy = strategy(body, current);
        let parameters = parameters(body, current);
        let language = language(body, current);
        checked!(
            name,
            description,
            status,
            template_name,
            params_strategy,
            parameters,
            language
        );
        let (template_language, language_given) = language;
        let (template_parameters, expressions) = parameters;
        Ok(Self {
            fields: CampaignFields {
                name,
                description,
                status,
                template_name,
                template_language,
                params_strategy,
                template_parameters,
            },
            language_given,
            expressions,
        })
    }
}

/// A text field given trimmed, else the current value.
fn text_or(given: Option<&str>, current: Option<String>) -> Option<String> {
    given.map(str::trim).map(str::to_owned).or(current)
}

fn name(body: &CampaignBody, current: Option<&campaign::Model>) -> Checked<String> {
    match text_or(body.name.as_deref(), current.map(|c| c.name.clone())) {
        None => problem(["name"], "is required"),
        Some(n) if n.is_empty() || n.chars().count() > MAX_NAME => {
            problem(["name"], format!("must be 1 to {MAX_NAME} characters"))
        }
        Some(n) => Ok(n),
    }
}

fn description(body: &CampaignBody, current: Option<&campaign::Model>) -> Checked<Option<Value>> {
    match &body.description {
        Some(Some(value)) if !value.is_object() => problem(["description"], "must be an object"),
        Some(Some(value)) if !within_free_form_limit(value) => {
            problem(["description"], too_large())
        }
        Some(value) => Ok(value.clone()),
        None => Ok(current.and_then(|c| c.description.clone())),
    }
}

fn status(body: &CampaignBody, current: Option<&campaign::Model>) -> Checked<CampaignStatus> {
    match body.status.as_deref() {
        Some(raw) => CampaignStatus::parse(raw).map_or_else(
            || {
                problem(
                    ["status"],
                    "must be ACTIVE, PENDING, DEPRECATED, INACTIVE or BLOCKED",
                )
            },
            Ok,
        ),
        None => current
            .map(|c| c.status)
            .map_or_else(|| problem(["status"], "is required"), Ok),
    }
}

fn template_name(body: &CampaignBody, current: Option<&campaign::Model>) -> Checked<String> {
    let given = text_or(
        body.template_name.as_deref(),
        current.map(|c| c.template_name.clone()),
    );
    match given {
        None => problem(["templateName"], "is required"),
        Some(n) if n.is_empty() => problem(["templateName"], "must not be empty"),
        Some(n) => Ok(n),
    }
}

fn strategy(body: &CampaignBody, current: Option<&campaign::Model>) -> Checked<ParamsStrategy> {
    match body.template_params_strategy.as_deref() {
        Some(raw) => ParamsStrategy::parse(raw).map_or_else(
            || {
                problem(
                    ["templateParamsStrategy"],
                    "must be USE_DEFAULT or USE_CONTACT_ASSOCIATION",
                )
            },
            Ok,
        ),
        None => current
            .map(|c| c.params_strategy)
            .map_or_else(|| problem(["templateParamsStrategy"], "is required"), Ok),
    }
}

/// The parameters, and the names of those whose expression parses (all of them, or a 400).
fn parameters(
    body: &CampaignBody,
    current: Option<&campaign::Model>,
) -> Checked<(Value, Vec<String>)> {
    let parameters = match &body.template_parameters {
        Some(raw) => Value::Object(raw.clone()),
        None => current.map_or_else(|| json!({}), |c| c.template_parameters.clone()),
    };
    if !within_free_form_limit(&parameters) {
        return problem(["templateParameters"], too_large());
    }
    let mut expressions = Vec::new();
    let mut problems = Vec::new();
    for (parameter, expression) in parameters.as_object().into_iter().flatten() {
        let path = ["templateParameters", parameter.as_str()];
        match params::parse_one(parameter, expression) {
            Ok(_) => expressions.push(parameter.clone()),
            Err(found) => problems.push(FieldError::new(path, found)),
        }
    }
    if problems.is_empty() {
        Ok((parameters, expressions))
    } else {
        Err(problems)
    }
}

/// The template's language and whether it was given (or kept): a PATCH that names another
/// template without a language leaves it for the template to say.
fn language(body: &CampaignBody, current: Option<&campaign::Model>) -> Checked<(String, bool)> {
    let language = body
        .template_language
        .as_deref()
        .map(str::trim)
        .map(str::to_owned)
        .filter(|l| !l.is_empty());
    let template_changed = body.template_name.is_some() || body.template_language.is_some();
    Ok(match (language, current) {
        (Some(language), _) if !is_template_language(&language) => {
            return Err(vec![FieldError::new(
                ["templateLanguage"],
                "must be a language code such as en_US or pt_BR",
            )]);
        }
        (Some(language), _) => (language, true),
        (None, Some(c))
            if !template_changed || body.template_name.as_deref() == Some(&c.template_name) =>
        {
            (c.template_language.clone(), true)
        }
        _ => (String::new(), false),
    })
}
