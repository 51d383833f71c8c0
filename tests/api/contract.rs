//! The OpenAPI document is the contract: every enum value, required field and bound it states
//! for a request body is what the API accepts and refuses, and the answers read back from the
//! API match the schemas it states for them. A client generated from the document gets no 400
//! for data the document allows.

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::flows::{campaign, people, sandbox_with_template};
use crate::helpers::{TestApp, expect_status, spawn_app};

/// The document, read from the running server.
struct Document(Value);

impl Document {
    async fn of(app: &TestApp) -> Self {
        let response = app
            .request(Method::GET, "/openapi.json", None)
            .send()
            .await
            .expect("request");
        Self(expect_status(response, 200).await)
    }

    /// `schema` with its `$ref` followed.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference
                    .strip_prefix("#/components/schemas/")
                    .expect("a schema reference");
                self.resolve(&self.0["components"]["schemas"][name])
            }
            None => schema,
        }
    }

    fn operation(&self, method: &Method, template: &str) -> &Value {
        let operation = &self.0["paths"][template][method.as_str().to_ascii_lowercase()];
        assert!(operation.is_object(), "{method} {template} is documented");
        operation
    }

    fn request_schema(&self, method: &Method, template: &str) -> &Value {
        let operation = self.operation(method, template);
        self.resolve(&operation["requestBody"]["content"]["application/json"]["schema"])
    }

    /// The schema of the operation's success answer.
    fn answer_schema(&self, method: &Method, template: &str) -> &Value {
        let responses = &self.operation(method, template)["responses"];
        let success = ["200", "201"]
            .iter()
            .map(|status| &responses[*status])
            .find(|r| r.is_object())
            .expect("a success answer");
        &success["content"]["application/json"]["schema"]
    }

    /// What in `value` the schema does not allow, each as `at: why`.
    fn mismatches(&self, schema: &Value, value: &Value, at: &str, found: &mut Vec<String>) {
        let schema = self.resolve(schema);
        for part in schema["allOf"].as_array().into_iter().flatten() {
            self.mismatches(part, value, at, found);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(alternatives) = schema[key].as_array() {
                let fits = alternatives.iter().any(|alternative| {
                    let mut none = Vec::new();
                    self.mismatches(alternative, value, at, &mut none);
                    none.is_empty()
                });
                if !fits {
                    found.push(format!("{at}: {value} fits none of {key}"));
                }
            }
        }
        let types: Vec<&str> = match &schema["type"] {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| is_of_type(value, t)) {
            found.push(format!("{at}: {value} is not {types:?}"));
            return;
        }
        if let Some(values) = schema["enum"].as_array()
            && !values.contains(value)
        {
            found.push(format!("{at}: {value} is not one of {values:?}"));
        }
        found.extend(
            bounds_broken(schema, value)
                .into_iter()
                .map(|why| format!("{at}: {value} {why}")),
        );
        if let Value::Object(object) = value {
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().expect("a field name");
                if !object.contains_key(name) {
                    found.push(format!("{at}: required `{name}` is missing"));
                }
            }
            let properties = schema["properties"].as_object();
            for (name, field) in object {
                let place = format!("{at}.{name}");
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => self.mismatches(property, field, &place, found),
                    None if schema["additionalProperties"].is_object() => {
                        self.mismatches(&schema["additionalProperties"], field, &place, found);
                    }
                    None => {}
                }
            }
        }
        if let (Value::Array(items), Some(item)) = (value, schema.get("items")) {
            for (index, element) in items.iter().enumerate() {
                self.mismatches(item, element, &format!("{at}[{index}]"), found);
            }
        }
    }
}

/// Which of the schema's bounds (pattern, lengths, range, item count, uuid and date-time
/// formats) `value` breaks.
fn bounds_broken(schema: &Value, value: &Value) -> Vec<String> {
    let mut broken = Vec::new();
    if let Value::String(text) = value {
        let chars = text.chars().count() as u64;
        if let Some(pattern) = schema["pattern"].as_str() {
            let regex = regex::Regex::new(pattern).expect("a documented pattern compiles");
            if !regex.is_match(text) {
                broken.push(format!("does not match {pattern}"));
            }
        }
        if schema["maxLength"].as_u64().is_some_and(|max| chars > max) {
            broken.push("is longer than maxLength".to_owned());
        }
        if schema["minLength"].as_u64().is_some_and(|min| chars < min) {
            broken.push("is shorter than minLength".to_owned());
        }
        let fits_format = match schema["format"].as_str() {
            Some("uuid") => uuid::Uuid::parse_str(text).is_ok(),
            Some("date-time") => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
            _ => true,
        };
        if !fits_format {
            broken.push(format!("is not a {}", schema["format"]));
        }
    }
    if let Some(number) = value.as_f64() {
        if schema["maximum"].as_f64().is_some_and(|max| number > max) {
            broken.push("is above maximum".to_owned());
        }
        if schema["minimum"].as_f64().is_some_and(|min| number < min) {
            broken.push("is below minimum".to_owned());
        }
    }
    if let Value::Array(items) = value
        && schema["maxItems"]
            .as_u64()
            .is_some_and(|max| items.len() as u64 > max)
    {
        broken.push("has more than maxItems".to_owned());
    }
    broken
}

fn is_of_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// Documented values a base body cannot take because another of its values rules them out, as
/// the document says: (operation path, field, value).
const RULED_OUT_BY_THE_BODY: [(&str, &str, &str); 2] = [
    // `carousel` exactly when the named template has a CAROUSEL component.
    (
        "/channels/{channel_id}/waba/send",
        "templateType",
        "carousel",
    ),
    // No components only for a template without placeholders (the base names one with two).
    (
        "/channels/{channel_id}/waba/send",
        "templateComponents",
        "null",
    ),
];

/// One documented operation and a body it accepts.
struct Case {
    method: Method,
    template: &'static str,
    path: String,
    body: Value,
}

/// A workspace with something of every kind, and a request body each operation accepts.
async fn cases(app: &TestApp) -> Vec<Case> {
    let channel = sandbox_with_template(app, "Sandbox").await;
    let ids = people(app, 2).await;
    let campaign_uid = campaign(app, &channel, "Spring", json!({})).await;
    // Changed by the PATCH's probes, so that no other case depends on it.
    let changed = campaign(app, &channel, "Autumn", json!({})).await;
    let (_, chat_channel) = app.chat_channel("Echo.", json!({})).await;
    let worker = app.worker("Sales").await;
    let stage = app.stage("Lead").await;
    let draft = app
        .created(
            "/flows",
            json!({"channelUid": channel, "campaignUid": campaign_uid,
                   "contactUids": ids, "status": "draft"}),
        )
        .await;
    let flow = draft["uid"].as_str().expect("uid").to_owned();
    let case = |method: Method, template: &'static str, path: String, body: Value| Case {
        method,
        template,
        path,
        body,
    };
    vec![
        case(
            Method::POST,
            "/workspace",
            "/workspace".to_owned(),
            json!({"name": "Branch", "description": "Second shop"}),
        ),
        case(
            Method::POST,
            "/workspace/api-keys",
            "/workspace/api-keys".to_owned(),
            json!({"name": "CI", "permissions": ["read"],
                   "workspace_id": app.owner.workspace_id.to_string()}),
        ),
        case(
            Method::POST,
            "/workers",
            "/workers".to_owned(),
            json!({"name": "Night shift", "timezone": "Europe/Lisbon"}),
        ),
        case(
            Method::POST,
            "/workers/{worker_id}/assistants",
            format!("/workers/{worker}/assistants"),
            json!({"name": "Rui", "instructions": "Be brief.", "languages": ["pt-BR"],
                   "provider": "PROVIDER_ONE", "model": "fake-model"}),
        ),
        case(
            Method::POST,
            "/channels/waba",
            "/channels/waba".to_owned(),
            json!({"name": "Test line", "integration": "sandbox"}),
        ),
        case(
            Method::POST,
            "/stages",
            "/stages".to_owned(),
            json!({"name": "Customer", "description": "Bought once"}),
        ),
        case(
            Method::PUT,
            "/stages/{stage_id}",
            format!("/stages/{stage}"),
            json!({"name": "Warm lead"}),
        ),
        case(
            Method::PUT,
            "/identity/{identity_id}",
            "/identity/crm-9".to_owned(),
            json!({"name": "Rita", "phone": "+351912000999", "email": "rita@example.test"}),
        ),
        case(
            Method::PUT,
            "/memory/from/{identity_id}",
            "/memory/from/p0".to_owned(),
            json!({"key": "profile.city", "value": "Porto"}),
        ),
        case(
            Method::POST,
            "/channels/{channel_id}/waba/templates",
            format!("/channels/{channel}/waba/templates"),
            json!({"name": "welcome", "type": "UTILITY", "language": "en_US",
                   "components": [{"type": "BODY", "text": "Welcome!"}]}),
        ),
        case(
            Method::POST,
            "/channels/{channel_id}/waba/send",
            format!("/channels/{channel}/waba/send"),
            json!({"identity": {"name": "Ana", "phone": "+351912000111"},
                   "templateId": "order_update", "templateType": "text", "templateLanguage": "en_US",
                   "templateComponents": {"body": [{"type": "text", "text": "Ana"},
                                                   {"type": "text", "text": "#7"}]}}),
        ),
        case(
            Method::POST,
            "/campaigns",
            "/campaigns".to_owned(),
            json!({"channelUid": channel, "name": "Summer", "status": "ACTIVE",
                   "templateName": "order_update", "templateParamsStrategy": "USE_DEFAULT"}),
        ),
        case(
            Method::PATCH,
            "/campaigns/{uid}",
            format!("/campaigns/{changed}"),
            json!({"name": "Spring sale"}),
        ),
        case(
            Method::POST,
            "/flows",
            "/flows".to_owned(),
            json!({"channelUid": channel, "campaignUid": campaign_uid, "contactUids": ["p0"],
                   "status": "draft", "configuration": {"maxRetries": 1}}),
        ),
        case(
            Method::PATCH,
            "/flows/{uid}",
            format!("/flows/{flow}"),
            json!({"description": "Spring run"}),
        ),
        case(
            Method::POST,
            "/scheduled-tasks",
            "/scheduled-tasks".to_owned(),
            json!({"name": "Promote", "task_type": "set_stage",
                   "payload": {"identity_id": "p1", "stage_id": stage},
                   "scheduled_at": "2099-01-01T09:00:00Z"}),
        ),
        case(
            Method::POST,
            "/conversation/{identity_id}/chat/{channel_id}",
            format!("/conversation/p0/chat/{chat_channel}"),
            json!({"message": "Hello"}),
        ),
    ]
}

/// The answer to `body` at `case`'s operation.
async fn answer(app: &TestApp, case: &Case, body: &Value) -> (u16, Value) {
    let response = app.send_json(case.method.clone(), &case.path, body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Whether an answer is a 400 naming `path` (or a place inside it).
fn refused_at(status: u16, body: &Value, path: &[Value]) -> bool {
    status == 400
        && body["details"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|detail| {
                detail["path"]
                    .as_array()
                    .is_some_and(|p| p.starts_with(path))
            })
}

/// `body` with the value at `path` replaced (`None`: removed).
fn with(body: &Value, path: &[Value], value: Option<Value>) -> Value {
    let mut body = body.clone();
    let (last, parents) = path.split_last().expect("a path");
    let mut object = &mut body;
    for segment in parents {
        object = &mut object[segment.as_str().expect("a field")];
    }
    let object: &mut Map<String, Value> = object.as_object_mut().expect("an object");
    let name = last.as_str().expect("a field").to_owned();
    match value {
        Some(value) => object.insert(name, value),
        None => object.remove(&name),
    };
    body
}

/// Values the document allows for a field, and values it does not, from its schema.
fn probes(doc: &Document, schema: &Value) -> (Vec<Value>, Vec<Value>) {
    let schema = doc.resolve(schema);
    // A nullable reference is `oneOf: [null, $ref]`: its rules are the other alternative's.
    for key in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema[key].as_array() {
            let mut given = alternatives.iter().filter(|a| a["type"] != "null");
            if let (Some(only), None) = (given.next(), given.next()) {
                let (mut allowed, refused) = probes(doc, only);
                allowed.push(Value::Null);
                return (allowed, refused);
            }
        }
    }
    let mut allowed = Vec::new();
    let mut refused = Vec::new();
    if schema["type"]
        .as_array()
        .is_some_and(|types| types.contains(&json!("null")))
    {
        allowed.push(Value::Null);
    }
    if let Some(values) = schema["enum"].as_array() {
        allowed.extend(values.iter().cloned());
        refused.push(json!("not-a-documented-value"));
    }
    let is_array = match &schema["type"] {
        Value::Array(types) => types.contains(&json!("array")),
        one => one == "array",
    };
    if is_array && let Some(item) = schema.get("items") {
        let (items, wrong) = probes(doc, item);
        allowed.extend(items.into_iter().map(|v| json!([v])));
        refused.extend(wrong.into_iter().map(|v| json!([v])));
    }
    let plain = schema["pattern"].is_null() && schema["format"].is_null();
    if let Some(max) = schema["maxLength"].as_u64().filter(|_| plain) {
        let max = usize::try_from(max).expect("a length");
        allowed.push(json!("x".repeat(max)));
        refused.push(json!("x".repeat(max + 1)));
    }
    if let Some(min) = schema["minLength"].as_u64().filter(|m| *m > 0) {
        let min = usize::try_from(min).expect("a length");
        refused.push(json!("x".repeat(min - 1)));
    }
    if schema["pattern"].is_string() {
        refused.push(json!("!!"));
        allowed.extend(example_of(schema).filter(|e| e.is_string()).cloned());
    }
    if let Some(max) = schema["maximum"].as_u64() {
        allowed.push(json!(max));
        refused.push(json!(max + 1));
    }
    if let Some(min) = schema["minimum"].as_i64() {
        allowed.push(json!(min));
        refused.push(json!(min - 1));
    }
    (allowed, refused)
}

/// Every documented rule of the body's fields (and of the objects it nests), tried one at a
/// time on a body the operation accepts; answers what did not hold.
async fn rules_broken(
    app: &TestApp,
    doc: &Document,
    case: &Case,
    schema: &Value,
    at: Vec<Value>,
    tried: &mut usize,
) -> Vec<String> {
    let mut broken = Vec::new();
    let schema = doc.resolve(schema);
    let operation = format!("{} {}", case.method, case.template);
    for name in schema["required"].as_array().into_iter().flatten() {
        let path = [at.clone(), vec![name.clone()]].concat();
        for (value, shown) in [(None, "without"), (Some(Value::Null), "null for")] {
            *tried += 1;
            let (status, body) = answer(app, case, &with(&case.body, &path, value)).await;
            if !refused_at(status, &body, &path) {
                broken.push(format!(
                    "{operation}: {shown} required {path:?}: {status} {body}"
                ));
            }
        }
    }
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        let path = [at.clone(), vec![json!(name)]].concat();
        let (allowed, refused) = probes(doc, field);
        for value in allowed {
            let ruled_out = RULED_OUT_BY_THE_BODY.iter().any(|(t, f, v)| {
                *t == case.template
                    && *f == name
                    && (value == *v || (value.is_null() && *v == "null"))
            });
            if ruled_out {
                continue;
            }
            let (status, body) =
                answer(app, case, &with(&case.body, &path, Some(value.clone()))).await;
            *tried += 1;
            if refused_at(status, &body, &path) {
                broken.push(format!(
                    "{operation}: {path:?} = {value} is documented but refused: {body}"
                ));
            }
        }
        for value in refused {
            let shown: String = value.to_string().chars().take(40).collect();
            *tried += 1;
            let (status, body) = answer(app, case, &with(&case.body, &path, Some(value))).await;
            if !refused_at(status, &body, &path) {
                broken.push(format!(
                    "{operation}: {path:?} = {shown} is outside the document but got {status}"
                ));
            }
        }
        let nested = doc.resolve(field);
        let given = at
            .iter()
            .chain([&json!(name)])
            .try_fold(&case.body, |v, s| v.get(s.as_str().expect("a field")));
        if nested["properties"].is_object() && given.is_some_and(Value::is_object) {
            broken.extend(Box::pin(rules_broken(app, doc, case, nested, path, tried)).await);
        }
    }
    broken
}

/// Every documented rule of a list's query parameters, tried one at a time.
async fn query_rules_broken(
    app: &TestApp,
    doc: &Document,
    template: &str,
    operation: &Value,
) -> Vec<String> {
    let mut broken = Vec::new();
    let parameters = operation["parameters"].as_array().into_iter().flatten();
    for parameter in parameters.filter(|p| p["in"] == "query") {
        let name = parameter["name"].as_str().expect("a name");
        let (allowed, refused) = probes(doc, &parameter["schema"]);
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        for (value, documented) in allowed
            .iter()
            .map(|v| (v, true))
            .chain(refused.iter().map(|v| (v, false)))
        {
            // The probes are plain words, numbers and `!`: nothing to escape.
            let response = app.get(&format!("{template}?{name}={}", text(value))).await;
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if refused_at(status, &body, &[json!(name)]) == documented {
                broken.push(format!("GET {template}?{name}={value}: {status} {body}"));
            }
        }
    }
    broken
}

#[tokio::test]
async fn request_bodies_are_refused_and_accepted_as_the_document_says() {
    let app = spawn_app().await;
    let doc = Document::of(&app).await;
    let mut broken = Vec::new();
    let mut tried = 0;
    for case in cases(&app).await {
        let (status, body) = answer(&app, &case, &case.body).await;
        assert!(
            (200..300).contains(&status),
            "{} {}: the base body is accepted: {status} {body}",
            case.method,
            case.path
        );
        doc.mismatches(
            doc.answer_schema(&case.method, case.template),
            &body,
            &format!("{} {}", case.method, case.template),
            &mut broken,
        );
        let schema = doc.request_schema(&case.method, case.template);
        broken.extend(rules_broken(&app, &doc, &case, schema, Vec::new(), &mut tried).await);
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    eprintln!("{tried} documented rules tried");
    assert!(tried >= 150, "only {tried} rules tried");
}

#[tokio::test]
async fn answers_read_back_match_their_documented_schemas() {
    let app = spawn_app().await;
    let doc = Document::of(&app).await;
    let cases = cases(&app).await;
    for case in &cases {
        let (status, _) = answer(&app, case, &case.body).await;
        assert!(
            (200..300).contains(&status),
            "{} {}",
            case.method,
            case.path
        );
    }
    let mut broken = Vec::new();
    let mut read = 0;
    for (template, item) in doc.0["paths"].as_object().expect("paths") {
        if template.contains('{') || item["get"].is_null() || template == "/metrics" {
            continue;
        }
        let response = app.get(template).await;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status != 200 {
            continue;
        }
        doc.mismatches(
            doc.answer_schema(&Method::GET, template),
            &body,
            template,
            &mut broken,
        );
        read += 1;
        broken.extend(query_rules_broken(&app, &doc, template, &item["get"]).await);
    }
    assert!(read >= 12, "only {read} lists read back");
    assert!(broken.is_empty(), "{}", broken.join("\n"));

    // The check itself sees a wrong value: a Rust name where the wire value belongs.
    let mut found = Vec::new();
    let flows = doc.answer_schema(&Method::GET, "/flows");
    let mut renamed = expect_status(app.get("/flows").await, 200).await;
    renamed["data"][0]["status"] = json!("Queued");
    doc.mismatches(flows, &renamed, "GET /flows", &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
}

/// A schema's (or content's, or parameter's) example: `example`, or the first of `examples`
/// when they are a list (a content's `examples` are named, not listed).
fn example_of(node: &Value) -> Option<&Value> {
    node.get("example")
        .or_else(|| node["examples"].as_array().and_then(|list| list.first()))
}

/// Every `example` of the document, with the schema it illustrates and where it is.
fn examples<'a>(node: &'a Value, at: &str, found: &mut Vec<(String, &'a Value, &'a Value)>) {
    match node {
        Value::Object(object) => {
            if let Some(example) = example_of(node) {
                // A content or parameter's example illustrates its `schema`; a schema's, itself.
                let schema = object.get("schema").unwrap_or(node);
                found.push((at.to_owned(), schema, example));
            }
            for (key, child) in object {
                if key != "example" && key != "examples" {
                    examples(child, &format!("{at}/{key}"), found);
                }
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                examples(child, &format!("{at}/{index}"), found);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_example_in_the_document_fits_its_schema() {
    let app = spawn_app().await;
    let doc = Document::of(&app).await;
    let mut found = Vec::new();
    examples(&doc.0, "", &mut found);
    let mut broken = Vec::new();
    for (at, schema, example) in &found {
        doc.mismatches(schema, example, at, &mut broken);
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(found.len() >= 20, "only {} examples", found.len());

    // The check itself sees a bad example.
    let mut seen = Vec::new();
    let schema = json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3});
    doc.mismatches(&schema, &json!("Abcd"), "probe", &mut seen);
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// The body the docs page's "Try it out" fills in for `schema`, as Swagger UI samples it: a
/// documented example first, then the first enum value, then a value of the first type
/// (`"string"`, `0`, `true`, one item, every property, three additional properties).
fn swagger_sample(doc: &Document, schema: &Value) -> Value {
    let schema = doc.resolve(schema);
    if let Some(example) = example_of(schema) {
        return example.clone();
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(first) = schema[key].as_array().and_then(|a| a.first()) {
            return swagger_sample(doc, first);
        }
    }
    if let Some(first) = schema["enum"].as_array().and_then(|a| a.first()) {
        return first.clone();
    }
    let kind = match &schema["type"] {
        Value::Array(types) => types.first().cloned().unwrap_or(Value::Null),
        one => one.clone(),
    };
    match kind.as_str() {
        Some("string") => match schema["format"].as_str() {
            Some("uuid") => json!("3fa85f64-5717-4562-b3fc-2c963f66afa6"),
            Some("date-time") => json!(chrono::Utc::now().to_rfc3339()),
            Some("email") => json!("user@example.com"),
            _ => json!("string"),
        },
        Some("integer" | "number") => schema.get("minimum").cloned().unwrap_or(json!(0)),
        Some("boolean") => json!(true),
        Some("null") => Value::Null,
        Some("array") => json!([swagger_sample(doc, &schema["items"])]),
        _ => {
            let mut object = Map::new();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                object.insert(name.clone(), swagger_sample(doc, property));
            }
            if schema["additionalProperties"].is_object() {
                for n in 1..=3 {
                    let value = swagger_sample(doc, &schema["additionalProperties"]);
                    object.insert(format!("additionalProp{n}"), value);
                }
            }
            Value::Object(object)
        }
    }
}

/// Fields with a pattern but no example: "Try it out" would fill in `"string"`.
fn patterns_without_example(doc: &Document, schema: &Value, at: &str, found: &mut Vec<String>) {
    let schema = doc.resolve(schema);
    if schema["pattern"].is_string() && example_of(schema).is_none() {
        found.push(at.to_owned());
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        patterns_without_example(doc, property, &format!("{at}.{name}"), found);
    }
    for key in ["items", "additionalProperties"] {
        if schema[key].is_object() {
            patterns_without_example(doc, &schema[key], &format!("{at}[]"), found);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for alternative in schema[key].as_array().into_iter().flatten() {
            patterns_without_example(doc, alternative, at, found);
        }
    }
}

#[tokio::test]
async fn try_it_out_with_the_docs_pages_own_bodies_is_never_refused_as_malformed() {
    let app = spawn_app().await;
    let doc = Document::of(&app).await;
    let mut broken = Vec::new();
    let mut tried = 0;
    let paths = doc.0["paths"].as_object().expect("paths");
    for (template, item) in paths {
        for (method, operation) in item.as_object().expect("an item") {
            let body = &operation["requestBody"]["content"]["application/json"]["schema"];
            if body.is_null() || template.starts_with("/webhooks") {
                continue;
            }
            let at = format!("{} {template}", method.to_uppercase());
            patterns_without_example(&doc, body, &at, &mut broken);
            let mut path = template.clone();
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["in"] == "path" {
                    let sample = example_of(parameter)
                        .cloned()
                        .unwrap_or_else(|| swagger_sample(&doc, &parameter["schema"]));
                    let text = sample
                        .as_str()
                        .map_or_else(|| sample.to_string(), str::to_owned);
                    path = path.replace(
                        &format!("{{{}}}", parameter["name"].as_str().expect("a name")),
                        &text,
                    );
                }
            }
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("a method");
            let sample = swagger_sample(&doc, body);
            let response = app.send_json(method, &path, &sample).await;
            let status = response.status().as_u16();
            tried += 1;
            let answer: Value = response.json().await.unwrap_or(Value::Null);
            // An example's ids name nothing in this workspace: that refusal is the data's.
            let names_nothing = answer["details"].as_array().is_some_and(|details| {
                details.iter().all(|d| {
                    d["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("names no"))
                })
            });
            if status == 400 && !names_nothing || status >= 500 && status != 502 {
                broken.push(format!("{at} with {sample}: {status} {answer}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(tried >= 25, "only {tried} bodies tried");
}
