//! The document as client generators read it (`openapi-python-client`, `openapi-typescript`):
//! a free-form object says it takes any property (without `additionalProperties`, a generator
//! types it as an object with none), an array names its items (a generator skips an operation
//! whose body holds an array of nothing), and a page's or an envelope's data refers to its
//! record's schema (not an inline copy, which a generator turns into one more model per list).

use serde_json::{Map, Value, json};

/// Applies the three rules to `document` (the document as JSON).
pub(super) fn for_generators(document: &mut Value) {
    open_free_forms(document);
    let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let names: Vec<String> = schemas.keys().cloned().collect();
    for name in names {
        refer_wrapped_data(schemas, &name);
    }
}

/// Whether a schema's `type` is (or includes) `kind`.
fn has_type(schema: &Map<String, Value>, kind: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == kind,
        Some(Value::Array(types)) => types.iter().any(|t| t == kind),
        _ => false,
    }
}

/// Every object schema with neither properties nor a rule for them takes any property; every
/// array schema without items takes any item.
fn open_free_forms(value: &mut Value) {
    match value {
        Value::Object(schema) => {
            let composed = ["$ref", "allOf", "oneOf", "anyOf"]
                .iter()
                .any(|k| schema.contains_key(*k));
            if !composed
                && has_type(schema, "object")
                && !schema.contains_key("properties")
                && !schema.contains_key("additionalProperties")
            {
                schema.insert("additionalProperties".to_owned(), Value::Bool(true));
            }
            if !composed && has_type(schema, "array") && !schema.contains_key("items") {
                schema.insert("items".to_owned(), json!({}));
            }
            for child in schema.values_mut() {
                open_free_forms(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(open_free_forms),
        _ => {}
    }
}

/// In `Envelope_X`, `PageResponse_X` and `CursorResponse_X` (and `Envelope_Vec_X`), the data
/// (or the data's items) refers to `X` when `X` is a component with the same schema.
fn refer_wrapped_data(schemas: &mut Map<String, Value>, name: &str) {
    let Some((wrapper, inner)) = name.split_once('_') else {
        return;
    };
    if !matches!(wrapper, "Envelope" | "PageResponse" | "CursorResponse") {
        return;
    }
    let (record, in_array) = match inner.strip_prefix("Vec_") {
        Some(record) => (record, true),
        None => (inner, wrapper != "Envelope"),
    };
    let Some(component) = schemas.get(record).cloned() else {
        return;
    };
    let pointer = if in_array {
        "/properties/data/items"
    } else {
        "/properties/data"
    };
    let Some(data) = schemas.get_mut(name).and_then(|s| s.pointer_mut(pointer)) else {
        return;
    };
    if *data == component {
        *data = json!({"$ref": format!("#/components/schemas/{record}")});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_forms_open_and_wrapped_records_are_referred_to() {
        let record = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        let mut document = json!({"components": {"schemas": {
            "WorkerRecord": record,
            "PageResponse_WorkerRecord": {"type": "object", "properties": {
                "data": {"type": "array", "items": record}}},
            "Envelope_WorkerRecord": {"type": "object", "properties": {"data": record}},
            "Body": {"type": "object", "properties": {
                "metadata": {"type": ["object", "null"]},
                "value": {"type": ["string", "array", "object"]}}},
        }}});

        for_generators(&mut document);

        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["PageResponse_WorkerRecord"]["properties"]["data"]["items"],
            json!({"$ref": "#/components/schemas/WorkerRecord"})
        );
        assert_eq!(
            schemas["Envelope_WorkerRecord"]["properties"]["data"],
            json!({"$ref": "#/components/schemas/WorkerRecord"})
        );
        let body = &schemas["Body"]["properties"];
        assert_eq!(body["metadata"]["additionalProperties"], true);
        assert_eq!(body["value"]["additionalProperties"], true);
        assert_eq!(body["value"]["items"], json!({}));
    }
}
