//! Templates on the way out: finding the one a send names among a channel's templates,
//! turning the caller's parameters into Meta's send components, and rendering the text the
//! person sees (stored in the conversation so that the assistant knows what was said).

use serde_json::{Map, Value, json};

use super::outgoing::TemplateMessage;

/// Parameters of a send: a lower-case component type (`header`, `body`, `button`) mapped to
/// its array of Meta parameter objects, e.g. `{"body": [{"type": "text", "text": "Ana"}]}`.
pub type TemplateParameters = Map<String, Value>;

/// The template a send asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRef {
    /// The template's name, or its Meta id.
    pub name_or_id: String,
    /// Its language (`en_US`).
    pub language: String,
    /// Whether the sender expects a carousel template (`templateType: carousel`).
    pub carousel: bool,
}

/// A template ready to send, with the text the person will see.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedTemplate {
    /// What goes on the wire.
    pub message: TemplateMessage,
    /// The body with its placeholders filled.
    pub text: String,
}

mod header;

pub use self::header::{HeaderFile, header_links, media_header};

/// The parameters of a send do not fit its template's placeholders.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct ParameterMismatch {
    /// The component: `body` or `header`.
    pub component: &'static str,
    /// What it needs that the send does not give.
    pub problem: String,
}

/// Checks that `parameters` give exactly one value per placeholder of `template`'s BODY and
/// text HEADER (Meta refuses a send that gives more or fewer, and a transcript would show an
/// unfilled `{{n}}`), and the file of a media HEADER.
///
/// # Errors
/// The first component whose parameters do not fit.
pub fn check_parameters(
    template: &Value,
    parameters: &TemplateParameters,
) -> Result<(), ParameterMismatch> {
    if let Some(kind) = media_header(template) {
        header::header_file(kind, parameters)?;
    }
    for (component, expected) in placeholder_counts(template) {
        if component == "header" && media_header(template).is_some() {
            continue;
        }
        let given = parameters
            .get(component)
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if given != expected {
            return Err(ParameterMismatch {
                component,
                problem: format!(
                    "needs exactly {expected} parameters for the template's {component} \
                     placeholders, got {given}"
                ),
            });
        }
    }
    Ok(())
}

/// How many distinct placeholders the BODY and a text HEADER of `template` have.
fn placeholder_counts(template: &Value) -> [(&'static str, usize); 2] {
    let mut counts = [("body", 0), ("header", 0)];
    for component in template["components"].as_array().into_iter().flatten() {
        let kind = component["type"].as_str().unwrap_or_default();
        let text = component["text"].as_str().unwrap_or_default();
        let text_format = component["format"]
            .as_str()
            .is_none_or(|f| f.eq_ignore_ascii_case("text"));
        let slot = if kind.eq_ignore_ascii_case("body") {
            0
        } else if kind.eq_ignore_ascii_case("header") && text_format {
            1
        } else {
            continue;
        };
        counts[slot].1 = distinct_placeholders(text);
    }
    counts
}

/// How many distinct `{{…}}` placeholders `text` has.
fn distinct_placeholders(text: &str) -> usize {
    let mut names: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = after[..end].trim();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
        rest = &after[end + 2..];
    }
    names.len()
}

impl TemplateRef {
    /// The template among `templates` (as Meta lists them) that this names, in its language.
    pub fn find<'a>(&self, templates: &'a [Value]) -> Option<&'a Value> {
        templates.iter().find(|t| {
            (t["name"] == self.name_or_id.as_str() || t["id"] == self.name_or_id.as_str())
                && t["language"] == self.language.as_str()
        })
    }

    /// Whether `template` (Meta's definition) has the shape the sender expects: a carousel
    /// has a CAROUSEL component, other types have none.
    pub fn shape_matches(&self, template: &Value) -> bool {
        let is_carousel = template["components"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["type"]
                    .as_str()
                    .is_some_and(|t| t.eq_ignore_ascii_case("carousel"))
            });
        is_carousel == self.carousel
    }

    /// Renders `template` (Meta's definition) with `parameters`.
    pub fn render(&self, template: &Value, parameters: &TemplateParameters) -> RenderedTemplate {
        let name = template["name"]
            .as_str()
            .unwrap_or(&self.name_or_id)
            .to_owned();
        RenderedTemplate {
            message: TemplateMessage {
                name,
                language: self.language.clone(),
                components: wire_components(parameters),
                category: template["category"].as_str().map(str::to_owned),
            },
            text: match media_header(template) {
                Some(kind) => format!("[{kind}] {}", render_body(template, parameters)),
                None => render_body(template, parameters),
            },
        }
    }
}

fn body_parameters(parameters: &TemplateParameters) -> Vec<Value> {
    parameters
        .get("body")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Meta's `components` of a send: one per type, and one per button with its index.
pub fn wire_components(parameters: &TemplateParameters) -> Value {
    let mut components = Vec::new();
    for (kind, values) in parameters {
        let values = values.as_array().cloned().unwrap_or_default();
        if kind.starts_with("button") {
            for (index, parameter) in values.into_iter().enumerate() {
                components.push(json!({"type": "button", "sub_type": "quick_reply",
                                       "index": index.to_string(), "parameters": [parameter]}));
            }
        } else {
            components.push(json!({"type": kind, "parameters": values}));
        }
    }
    Value::Array(components)
}

/// The text the person sees: the BODY with `{{1}}`… (or `{{name}}`) filled from the body's
/// parameters, in one pass over the template's text: a value is copied as it is, never read
/// again for placeholders (a value `{{2}}` stays `{{2}}`). A placeholder without a value stays.
pub fn render_body(template: &Value, parameters: &TemplateParameters) -> String {
    let text = template["components"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("body"))
        })
        .and_then(|c| c["text"].as_str())
        .unwrap_or_default();
    let values = body_parameters(parameters);
    let value_of = |key: &str| {
        let parameter = match key.parse::<usize>() {
            Ok(position) => position.checked_sub(1).and_then(|i| values.get(i)),
            Err(_) => values.iter().find(|p| p["parameter_name"] == key),
        };
        parameter.map(|p| p["text"].as_str().unwrap_or_default())
    };
    let mut rendered = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        rendered.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            rest = &rest[start..];
            break;
        };
        let key = &after[..end];
        match value_of(key) {
            Some(value) => rendered.push_str(value),
            None => {
                rendered.push_str("{{");
                rendered.push_str(key);
                rendered.push_str("}}");
            }
        }
        rest = &after[end + 2..];
    }
    rendered.push_str(rest);
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_looks_like_a_placeholder_is_not_read_again() {
        let template =
            json!({"components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} {{3}}"}]});
        let mut parameters = Map::new();
        parameters.insert(
            "body".to_owned(),
            json!([{"type": "text", "text": "{{2}}"}, {"type": "text", "text": "SECRET"}]),
        );
        assert_eq!(
            render_body(&template, &parameters),
            "Hi {{2}}, your order SECRET {{3}}"
        );
    }

    #[test]
    fn a_template_body_is_rendered_with_positional_and_named_parameters() {
        let template = json!({"components": [{"type": "HEADER", "text": "x"}, {"type": "BODY", "text": "Hi {{1}}, order {{order}} ships {{2}}."}]});
        let mut parameters = Map::new();
        parameters.insert(
            "body".to_owned(),
            json!([{"type": "text", "text": "Ana"}, {"type": "text", "text": "today", "parameter_name": "order"}]),
        );
        assert_eq!(
            render_body(&template, &parameters),
            "Hi Ana, order today ships today."
        );
    }

    #[test]
    fn buttons_become_one_component_each_with_their_index() {
        let mut parameters = Map::new();
        parameters.insert(
            "button".to_owned(),
            json!([{"type": "payload", "payload": "a"}, {"type": "payload", "payload": "b"}]),
        );
        let wire = wire_components(&parameters);
        assert_eq!(wire[1]["index"], "1");
        assert_eq!(wire[0]["sub_type"], "quick_reply");
    }

    #[test]
    fn a_template_is_found_by_name_or_id_in_its_language() {
        let templates = vec![
            json!({"id": "1", "name": "hello", "language": "en_US"}),
            json!({"id": "2", "name": "hello", "language": "pt_BR"}),
        ];
        let by_name = TemplateRef {
            name_or_id: "hello".to_owned(),
            language: "pt_BR".to_owned(),
            carousel: false,
        };
        assert_eq!(
            by_name.find(&templates).map(|t| &t["id"]),
            Some(&json!("2"))
        );
        let by_id = TemplateRef {
            name_or_id: "1".to_owned(),
            language: "en_US".to_owned(),
            carousel: false,
        };
        assert!(by_id.find(&templates).is_some());
    }
}
