//! The OpenAPI document and the docs page: every route is documented, every documented
//! operation is routed, and the page works with no network.

use std::path::Path;

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{TestApp, expect_status, spawn_app};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
/// What the router answers for a path it does not know.
const UNKNOWN_ROUTE: &str = "Route not found";

async fn document(app: &TestApp) -> Value {
    let response = app
        .request(Method::GET, "/openapi.json", None)
        .send()
        .await
        .expect("request");
    expect_status(response, 200).await
}

/// A concrete path for a template: every `{parameter}` becomes an id that exists nowhere.
fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').expect("closing brace") + open;
        out.push_str("01a2082a-f1ae-73a2-91e3-8c65d77571bb");
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

fn method(name: &str) -> Method {
    Method::from_bytes(name.to_ascii_uppercase().as_bytes()).expect("method")
}

/// Answers that only the router itself gives: an unknown path or an unrouted method.
async fn router_refusal(app: &TestApp, verb: &str, path: &str) -> Option<(u16, String)> {
    let response = app
        .request(method(verb), path, None)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let unknown = status == 404 && text.contains(UNKNOWN_ROUTE);
    (unknown || status == 405).then_some((status, text))
}

#[tokio::test]
async fn every_documented_operation_is_routed_and_no_other_method_is() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 45, "only {} paths documented", paths.len());

    let mut problems = Vec::new();
    for (template, item) in paths {
        let path = concrete(template);
        for verb in METHODS {
            let documented = item.get(verb).is_some();
            let refusal = router_refusal(&app, verb, &path).await;
            match (documented, refusal) {
                (true, Some((status, body))) => problems.push(format!(
                    "{verb} {template} is documented but the router answers {status}: {body}"
                )),
                (false, None) => problems.push(format!(
                    "{verb} {template} is routed but not documented (no 405)"
                )),
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Routes enter the router only through utoipa-axum's `routes!`, which documents each one; a
/// plain `.route(...)` in the HTTP layer would be a route the document cannot know about.
#[test]
fn the_http_layer_routes_only_through_documented_handlers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![root.join("http.rs")];
    let mut dirs = vec![root.join("http")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src/http") {
            let path = entry.expect("entry").path();
            // The operator console's pages are HTML for browsers, not operations of the API's
            // document (tests/api/console.rs covers them); the peer route answers only the
            // other nodes of a cluster (tests/api/cluster.rs covers it).
            if path.ends_with("console")
                || path.ends_with("console.rs")
                || path.ends_with("peer.rs")
            {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut offenders = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for call in [".route(", ".route_service(", ".nest(", ".nest_service("] {
            if code.contains(call) {
                offenders.push(format!("{} calls {call}", file.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}

#[tokio::test]
async fn the_document_describes_auth_errors_and_every_operation() {
    let app = spawn_app().await;
    let doc = document(&app).await;

    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1"))
    );
    let scheme = &doc["components"]["securitySchemes"]["apiKey"];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");
    let error = &doc["components"]["schemas"]["Error"];
    for field in ["message", "error", "details"] {
        assert!(error["properties"].get(field).is_some(), "Error.{field}");
    }

    let mut operations = 0;
    for (template, item) in doc["paths"].as_object().expect("paths") {
        for verb in METHODS {
            let Some(op) = item.get(verb) else { continue };
            operations += 1;
            let name = format!("{verb} {template}");
            assert!(
                op["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{name}: tag"
            );
            let responses = op["responses"].as_object().expect("responses");
            assert!(
                responses.keys().any(|s| s.starts_with('2')),
                "{name}: success"
            );
            for status in ["400", "401", "404", "500"] {
                assert!(responses.contains_key(status), "{name}: {status}");
            }
            let public = ["/health", "/ready", "/webhooks/"]
                .iter()
                .any(|p| template.starts_with(p));
            assert_eq!(op.get("security").is_none(), public, "{name}: security");
        }
    }
    assert!(operations >= 79, "only {operations} operations");

    // The main bodies carry their schema, and the chat call its request body.
    let chat = &doc["paths"]["/conversation/{identity_id}/chat/{channel_id}"]["post"];
    assert!(chat["requestBody"]["content"]["application/json"]["schema"].is_object());
    let stream = &doc["paths"]["/conversation/{identity_id}/streaming"]["get"];
    assert!(stream["responses"]["200"]["content"]["text/event-stream"].is_object());
}

#[tokio::test]
async fn the_docs_page_and_its_assets_are_served_without_a_network() {
    let app = spawn_app().await;

    let page = app
        .request(Method::GET, "/docs/", None)
        .send()
        .await
        .expect("request");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("swagger-ui-bundle.js"), "{html}");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page loads something from elsewhere: {html}"
    );

    for asset in [
        "swagger-ui-bundle.js",
        "swagger-ui.css",
        "swagger-initializer.js",
    ] {
        let response = app
            .request(Method::GET, &format!("/docs/{asset}"), None)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{asset}");
        let body = response.text().await.expect("asset");
        assert!(
            body.len() > 100 || asset.ends_with("initializer.js"),
            "{asset}"
        );
        if asset == "swagger-initializer.js" {
            assert!(body.contains("/openapi.json"), "{body}");
        }
    }

    // `/docs` itself leads to the page.
    let response = app
        .request(Method::GET, "/docs", None)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
}
