//! Rendering assistant instructions: handlebars without HTML escaping (the text goes to a model
//! and to WhatsApp, not to a browser), missing values render empty.
//!
//! The context is `identity.{name,stage,external_id,phone,email,metadata}` and `memory`, whose
//! dotted keys become nested objects (`profile.name` → `memory.profile.name`).

use std::sync::{Arc, LazyLock};

use handlebars::{
    Context, Handlebars, RenderContext, Renderable, StringOutput, Template, TemplateError,
};
use serde_json::{Map, Value};

/// The engine every render uses: no HTML escaping, no registered templates or extra helpers.
static ENGINE: LazyLock<Handlebars<'static>> = LazyLock::new(|| {
    let mut engine = Handlebars::new();
    engine.register_escape_fn(handlebars::no_escape);
    engine
});

/// Renders `template` with `context`.
///
/// # Errors
/// Fails when the template does not compile or a helper fails; the message says why.
pub fn render(template: &str, context: &Value) -> Result<String, String> {
    Compiled::new(template).render(context.clone())
}

/// A template compiled once (an assistant's instructions, kept with its route) and rendered
/// on every turn; one that does not compile keeps its error for each render to answer.
#[derive(Clone, Debug)]
pub struct Compiled {
    template: Result<Arc<Template>, Arc<TemplateError>>,
    /// Whether the template places the person's memory or stage itself (`{{memory.…}}`,
    /// `{{identity.stage}}`): then it has full control of where they go.
    places_context: bool,
}

impl Compiled {
    /// Compiles `template`.
    pub fn new(template: &str) -> Self {
        Self {
            template: Template::compile(template).map(Arc::new).map_err(Arc::new),
            places_context: template.contains("memory") || template.contains("identity.stage"),
        }
    }

    /// Whether the template places the person's memory or stage itself; when it does not,
    /// the turn adds them after it.
    pub fn places_context(&self) -> bool {
        self.places_context
    }

    /// Renders it with `context`.
    ///
    /// # Errors
    /// Fails when the template did not compile or a helper fails; the message says why.
    pub fn render(&self, context: Value) -> Result<String, String> {
        let template = self.template.as_ref().map_err(|e| e.to_string())?;
        let context = Context::from(context);
        let mut output = StringOutput::new();
        template
            .render(
                &ENGINE,
                &context,
                &mut RenderContext::new(None),
                &mut output,
            )
            .map_err(|e| e.to_string())?;
        output.into_string().map_err(|e| e.to_string())
    }
}

/// Nests dotted memory keys into objects. When a key is both a value and a prefix
/// (`profile` and `profile.name`), the nested object wins.
pub fn nest_memory<'a>(entries: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Value {
    let mut root = Map::new();
    for (key, value) in entries {
        let segments: Vec<&str> = key.split('.').collect();
        insert_path(&mut root, &segments, value);
    }
    Value::Object(root)
}

fn insert_path(node: &mut Map<String, Value>, segments: &[&str], value: &Value) {
    match segments {
        [] => {}
        [last] => {
            if !node.get(*last).is_some_and(Value::is_object) {
                node.insert((*last).to_owned(), value.clone());
            }
        }
        [first, rest @ ..] => {
            let slot = node
                .entry((*first).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(child) = slot {
                insert_path(child, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_documented_expressions_render_without_escaping() {
        let memory_name = json!("Ana & Bo <3");
        let context = json!({
            "identity": {"name": "Ana", "stage": "Lead"},
            "memory": nest_memory([("profile.name", &memory_name)]),
        });
        let rendered = render(
            "Stage: {{identity.stage}}. {{#if memory.profile.name}}Name: {{memory.profile.name}}{{/if}}",
            &context,
        )
        .expect("renders");
        assert_eq!(rendered, "Stage: Lead. Name: Ana & Bo <3");
    }

    #[test]
    fn a_compiled_template_renders_as_the_text_does_and_keeps_its_error() {
        let context = json!({"identity": {"name": "Ana <3"}});
        let compiled = Compiled::new("Hi {{identity.name}}{{#if memory.x}}!{{/if}}");
        assert_eq!(
            compiled.render(context.clone()).expect("renders"),
            "Hi Ana <3"
        );
        assert_eq!(compiled.render(json!({})).expect("renders"), "Hi ");
        let broken = Compiled::new("Hi {{#if}}");
        let error = broken
            .render(context.clone())
            .expect_err("does not compile");
        assert_eq!(Some(error), render("Hi {{#if}}", &context).err());
    }

    #[test]
    fn missing_values_render_empty() {
        let rendered =
            render("[{{memory.nothing.here}}][{{identity.stage}}]", &json!({})).expect("renders");
        assert_eq!(rendered, "[][]");
    }

    #[test]
    fn dotted_keys_nest_and_the_nested_object_wins_over_a_scalar() {
        let (a, b, c) = (json!("x"), json!("Ana"), json!("pt"));
        let nested = nest_memory([
            ("profile", &a),
            ("profile.name", &b),
            ("preferences.language", &c),
        ]);
        assert_eq!(
            nested,
            json!({"profile": {"name": "Ana"}, "preferences": {"language": "pt"}})
        );
    }
}
