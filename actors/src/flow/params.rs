//! A campaign's template parameters: which parameters a template needs, the source expressions
//! that fill them (`name, metadata.first_name, default`), and their values for one person.
//!
//! Parameter names are `"1"`, `"2"` for the body's positional placeholders, `"header.1"` for
//! the header's, and a named parameter's own name. An expression is a comma-separated fallback
//! chain over `name`, `phone`, `email`, `external_id`, `metadata.<key>`, `memory.<key>`,
//! `stage` and `default` (the template's example value); the first non-empty value wins.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use crate::whatsapp::TemplateParameters;
use crate::whatsapp::template::{HeaderFile, media_header};

/// One link of a fallback chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The identity's name.
    Name,
    /// Its primary phone.
    Phone,
    /// Its primary e-mail.
    Email,
    /// Its external id.
    ExternalId,
    /// A key of its metadata object (dots walk into nested objects).
    Metadata(String),
    /// A memory entry's value.
    Memory(String),
    /// Its stage's name.
    Stage,
    /// The template's example value.
    Default,
    /// The file a media header shows, the same for every person.
    File(HeaderFile),
}

/// A parsed source expression: sources tried in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expression(pub Vec<Source>);

impl Expression {
    /// Parses `name, metadata.first_name, default`.
    ///
    /// # Errors
    /// Names the part that is not a source.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut sources = Vec::new();
        for part in text.split(',').map(str::trim) {
            let source = match part {
                "name" => Source::Name,
                "phone" => Source::Phone,
                "email" => Source::Email,
                "external_id" => Source::ExternalId,
                "stage" => Source::Stage,
                "default" => Source::Default,
                _ => match part.split_once('.') {
                    Some(("metadata", key)) if valid_key(key) => Source::Metadata(key.to_owned()),
                    Some(("memory", key)) if valid_key(key) => Source::Memory(key.to_owned()),
                    _ if part.is_empty() => return Err("an empty source".to_owned()),
                    _ => {
                        return Err(format!(
                            "unknown source `{part}` (use name, phone, email, external_id, \
                             metadata.<key>, memory.<key>, stage or default)"
                        ));
                    }
                },
            };
            sources.push(source);
        }
        Ok(Self(sources))
    }
}

fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.split('.').all(|segment| !segment.is_empty())
}

/// Parses every expression of a campaign's `templateParameters` (name → expression string).
///
/// # Errors
/// `(parameter name, problem)` of the first one that does not parse.
pub fn parse_all(
    parameters: &Map<String, Value>,
) -> Result<BTreeMap<String, Expression>, (String, String)> {
    let mut parsed = BTreeMap::new();
    for (name, expression) in parameters {
        let expression = parse_one(name, expression).map_err(|problem| (name.clone(), problem))?;
        parsed.insert(name.clone(), expression);
    }
    Ok(parsed)
}

/// One parameter's expression: a string for text, and for `header` an object naming the file
/// of a media header (`{"media_id": …}` or `{"link": …}`).
///
/// # Errors
/// What is wrong with it.
pub fn parse_one(name: &str, expression: &Value) -> Result<Expression, String> {
    match expression {
        Value::String(text) => Expression::parse(text),
        Value::Object(_) if name == MEDIA_HEADER => {
            HeaderFile::parse(expression).map(|file| Expression(vec![Source::File(file)]))
        }
        Value::Object(_) => Err(format!(
            "must be a string (an object names the file of a media header, as `{MEDIA_HEADER}`)"
        )),
        _ => Err("must be a string".to_owned()),
    }
}

/// The parameter name of a media header's file.
pub const MEDIA_HEADER: &str = "header";

/// Where a parameter goes in the send.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Slot {
    /// `{{n}}` of the body.
    Body(usize),
    /// `{{n}}` of the header.
    Header(usize),
    /// `{{name}}` of the body.
    Named(String),
    /// The file of an IMAGE, VIDEO or DOCUMENT header (its kind).
    File(&'static str),
}

/// A parameter a template needs and its example value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needed {
    /// Its name in `templateParameters`.
    pub name: String,
    slot: Slot,
    /// Meta's example value, if the template has one.
    pub example: Option<String>,
}

impl Needed {
    /// The kind of file this parameter is, for a media header's (`image`, `video`, `document`).
    pub fn file_kind(&self) -> Option<&'static str> {
        match self.slot {
            Slot::File(kind) => Some(kind),
            _ => None,
        }
    }
}

/// The parameters `template` (Meta's definition) needs, in send order.
pub fn needed(template: &Value) -> Vec<Needed> {
    let mut found = Vec::new();
    if let Some(kind) = media_header(template) {
        found.push(Needed {
            name: MEDIA_HEADER.to_owned(),
            slot: Slot::File(kind),
            example: None,
        });
    }
    for component in template["components"].as_array().into_iter().flatten() {
        let kind = component["type"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let text = component["text"].as_str().unwrap_or_default();
        let example = &component["example"];
        match kind.as_str() {
            "BODY" => {
                let positional = example["body_text"][0].as_array();
                let named: HashMap<&str, &str> = example["body_text_named_params"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| Some((p["param_name"].as_str()?, p["example"].as_str()?)))
                    .collect();
                for placeholder in placeholders(text) {
                    match placeholder.parse::<usize>() {
                        Ok(n) => found.push(Needed {
                            name: n.to_string(),
                            slot: Slot::Body(n),
                            example: positional
                                .and_then(|values| values.get(n.wrapping_sub(1)))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                        }),
                        Err(_) => found.push(Needed {
                            example: named.get(placeholder.as_str()).map(|v| (*v).to_owned()),
                            slot: Slot::Named(placeholder.clone()),
                            name: placeholder,
                        }),
                    }
                }
            }
            "HEADER"
                if component["format"]
                    .as_str()
                    .is_none_or(|f| f.eq_ignore_ascii_case("text")) =>
            {
                for placeholder in placeholders(text) {
                    if let Ok(n) = placeholder.parse::<usize>() {
                        found.push(Needed {
                            name: format!("header.{n}"),
                            slot: Slot::Header(n),
                            example: example["header_text"]
                                .as_array()
                                .and_then(|values| values.get(n.wrapping_sub(1)))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// The distinct placeholder names of `text` (`{{1}}`, `{{first_name}}`), in order.
fn placeholders(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = after[..end].trim().to_owned();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
        rest = &after[end + 2..];
    }
    names
}

/// What is known of one recipient, for the expressions to read.
#[derive(Clone, Debug, Default)]
pub struct Person {
    /// Name.
    pub name: Option<String>,
    /// Primary phone (E.164).
    pub phone: Option<String>,
    /// Primary e-mail.
    pub email: Option<String>,
    /// External id.
    pub external_id: Option<String>,
    /// Metadata object.
    pub metadata: Value,
    /// Memory entries by key.
    pub memory: HashMap<String, Value>,
    /// Stage name.
    pub stage: Option<String>,
}

impl Person {
    fn value(&self, source: &Source, example: Option<&str>) -> Option<String> {
        let text = match source {
            Source::Name => self.name.clone(),
            Source::Phone => self.phone.clone(),
            Source::Email => self.email.clone(),
            Source::ExternalId => self.external_id.clone(),
            Source::Stage => self.stage.clone(),
            Source::Default => example.map(str::to_owned),
            Source::Metadata(key) => key
                .split('.')
                .try_fold(&self.metadata, |value, segment| value.get(segment))
                .and_then(scalar_text),
            Source::Memory(key) => self.memory.get(key).and_then(scalar_text),
            Source::File(_) => None,
        };
        text.filter(|t| !t.trim().is_empty())
    }
}

/// A JSON value as parameter text: strings as they are, numbers and booleans written out.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// How parameters are filled, parsed from a campaign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filling {
    /// Example values only.
    Defaults,
    /// Each parameter's expression against the person; a parameter without one takes its
    /// example value.
    PerPerson(BTreeMap<String, Expression>),
}

impl Filling {
    /// Whether some expression reads `source`'s kind of value (memory, the stage), so that a
    /// recipient's record is read only as far as the campaign needs.
    pub fn reads(&self, wanted: fn(&Source) -> bool) -> bool {
        match self {
            Self::Defaults => false,
            Self::PerPerson(expressions) => expressions.values().any(|e| e.0.iter().any(wanted)),
        }
    }
}

/// Fills the `needed` parameters for `person`.
///
/// # Errors
/// The name of the first parameter with no value at all (the recipient is skipped).
pub fn fill(
    needed: &[Needed],
    filling: &Filling,
    person: &Person,
) -> Result<TemplateParameters, String> {
    let default = Expression(vec![Source::Default]);
    let mut body = Vec::new();
    let mut header = Vec::new();
    for parameter in needed {
        let expression = match filling {
            Filling::Defaults => &default,
            Filling::PerPerson(expressions) => expressions.get(&parameter.name).unwrap_or(&default),
        };
        if let Slot::File(kind) = parameter.slot {
            let file = expression.0.iter().find_map(|source| match source {
                Source::File(file) => Some(file.parameter(kind)),
                _ => None,
            });
            header.push(file.ok_or_else(|| parameter.name.clone())?);
            continue;
        }
        let value = expression
            .0
            .iter()
            .find_map(|source| person.value(source, parameter.example.as_deref()))
            .ok_or_else(|| parameter.name.clone())?;
        match &parameter.slot {
            Slot::Body(_) => body.push(json!({"type": "text", "text": value})),
            Slot::Named(name) => {
                body.push(json!({"type": "text", "parameter_name": name, "text": value}));
            }
            Slot::Header(_) => header.push(json!({"type": "text", "text": value})),
            Slot::File(_) => {}
        }
    }
    let mut parameters = TemplateParameters::new();
    if !header.is_empty() {
        parameters.insert("header".to_owned(), Value::Array(header));
    }
    if !body.is_empty() {
        parameters.insert("body".to_owned(), Value::Array(body));
    }
    Ok(parameters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        json!({"name": "order_ready", "language": "en_US", "components": [
            {"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}", "example": {"header_text": ["Ana"]}},
            {"type": "BODY", "text": "Order {{1}} for {{2}} is ready ({{1}}).",
             "example": {"body_text": [["A-1", "Ana"]]}},
        ]})
    }

    fn person() -> Person {
        Person {
            name: Some("Bea".into()),
            phone: Some("+5511999990000".into()),
            metadata: json!({"order": {"id": "B-7"}, "vip": true, "blank": "  "}),
            memory: HashMap::from([("profile.nickname".to_owned(), json!("Bee"))]),
            stage: Some("lead".into()),
            ..Person::default()
        }
    }

    #[test]
    fn expressions_parse_into_fallback_chains() {
        assert_eq!(
            Expression::parse(" name , metadata.order.id,memory.profile.nickname, stage, default"),
            Ok(Expression(vec![
                Source::Name,
                Source::Metadata("order.id".into()),
                Source::Memory("profile.nickname".into()),
                Source::Stage,
                Source::Default,
            ]))
        );
        assert!(
            Expression::parse("nickname")
                .expect_err("refused")
                .contains("`nickname`")
        );
        assert!(Expression::parse("metadata.").is_err());
        assert!(Expression::parse("name,,default").is_err());
        assert!(Expression::parse("").is_err());
    }

    #[test]
    fn a_campaign_names_the_parameter_that_does_not_parse() {
        let raw = json!({"1": "name", "2": "favourite_colour"});
        let (name, problem) = parse_all(raw.as_object().expect("valid")).expect_err("refused");
        assert_eq!(name, "2");
        assert!(problem.contains("favourite_colour"));
        assert!(parse_all(json!({"1": 3}).as_object().expect("valid")).is_err());
    }

    #[test]
    fn a_template_needs_each_placeholder_once_with_its_example() {
        let found = needed(&template());
        let names: Vec<_> = found.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["header.1", "1", "2"]);
        assert_eq!(found[2].example.as_deref(), Some("Ana"));
    }

    #[test]
    fn defaults_fill_every_parameter_with_its_example() {
        let filled =
            fill(&needed(&template()), &Filling::Defaults, &Person::default()).expect("valid");
        assert_eq!(filled["header"], json!([{"type": "text", "text": "Ana"}]));
        assert_eq!(
            filled["body"],
            json!([{"type": "text", "text": "A-1"}, {"type": "text", "text": "Ana"}])
        );
    }

    #[test]
    fn per_person_values_take_the_first_non_empty_source() {
        let expressions = parse_all(
            json!({"1": "metadata.missing, metadata.blank, metadata.order.id",
                   "2": "memory.profile.nickname, name",
                   "header.1": "email, default"})
            .as_object()
            .expect("valid"),
        )
        .expect("valid");
        let filled = fill(
            &needed(&template()),
            &Filling::PerPerson(expressions),
            &person(),
        )
        .expect("valid");
        assert_eq!(filled["body"][0]["text"], "B-7");
        assert_eq!(filled["body"][1]["text"], "Bee");
        assert_eq!(filled["header"][0]["text"], "Ana");
    }

    #[test]
    fn a_parameter_without_any_value_names_itself() {
        let expressions =
            parse_all(json!({"1": "email"}).as_object().expect("valid")).expect("valid");
        let bare = json!({"components": [{"type": "BODY", "text": "Hi {{1}}"}]});
        assert_eq!(
            fill(&needed(&bare), &Filling::PerPerson(expressions), &person()),
            Err("1".to_owned())
        );
        assert_eq!(
            fill(&needed(&bare), &Filling::Defaults, &person()),
            Err("1".to_owned())
        );
    }

    #[test]
    fn named_parameters_carry_their_names() {
        let named = json!({"parameter_format": "NAMED", "components": [{"type": "BODY",
            "text": "Hi {{first_name}}",
            "example": {"body_text_named_params": [{"param_name": "first_name", "example": "Ana"}]}}]});
        let expressions =
            parse_all(json!({"first_name": "name"}).as_object().expect("valid")).expect("valid");
        let filled =
            fill(&needed(&named), &Filling::PerPerson(expressions), &person()).expect("valid");
        assert_eq!(
            filled["body"],
            json!([{"type": "text", "parameter_name": "first_name", "text": "Bea"}])
        );
        let defaults =
            fill(&needed(&named), &Filling::Defaults, &Person::default()).expect("valid");
        assert_eq!(defaults["body"][0]["text"], "Ana");
    }

    #[test]
    fn numbers_and_booleans_are_written_out() {
        let expressions =
            parse_all(json!({"1": "metadata.vip"}).as_object().expect("valid")).expect("valid");
        let bare = json!({"components": [{"type": "BODY", "text": "VIP: {{1}}"}]});
        let filled =
            fill(&needed(&bare), &Filling::PerPerson(expressions), &person()).expect("valid");
        assert_eq!(filled["body"][0]["text"], "true");
    }
}
