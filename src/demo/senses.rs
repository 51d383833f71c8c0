//! What the demo's model makes of files, so that the demo shows media understood with nothing
//! outside the machine: a picture (an image part of the chat request) is told back by its type
//! and size, and a recording sent to `POST /v1/audio/transcriptions` is "transcribed" into a
//! sentence that says what it was. Real models see and hear; this one only measures.

use axum::extract::Multipart;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

/// What a message's content says: its text, or its parts' texts and a line for each picture.
pub(super) fn said(content: &Value) -> String {
    let Some(parts) = content.as_array() else {
        return content.as_str().unwrap_or_default().to_owned();
    };
    let said: Vec<String> = parts
        .iter()
        .filter_map(|part| match part["type"].as_str() {
            Some("image_url") => Some(seen(part["image_url"]["url"].as_str().unwrap_or(""))),
            Some("text") => part["text"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    said.join(" ")
}

/// `(a picture: image/png, 12 KB)` of a `data:` URL.
fn seen(url: &str) -> String {
    let Some((head, data)) = url.strip_prefix("data:").and_then(|u| u.split_once(',')) else {
        return "(a picture at a link)".to_owned();
    };
    let mime = head.trim_end_matches(";base64");
    let size = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_or(0, |b| b.len());
    format!("(a picture: {mime}, {})", kilobytes(size))
}

fn kilobytes(bytes: usize) -> String {
    format!("{} KB", bytes.div_ceil(1024))
}

/// `POST /v1/audio/transcriptions` (multipart `file` and `model`), answered `{"text"}`.
pub(super) async fn transcriptions(mut form: Multipart) -> Response {
    let mut heard = None;
    while let Ok(Some(field)) = form.next_field().await {
        if field.name() == Some("file") {
            let mime = field.content_type().unwrap_or("audio").to_owned();
            let size = field.bytes().await.map_or(0, |b| b.len());
            heard = Some(format!("(a recording: {mime}, {})", kilobytes(size)));
        }
    }
    match heard {
        Some(text) => axum::Json(json!({ "text": text })).into_response(),
        None => {
            let error = json!({"error": {"message": "no file", "type": "invalid_request_error"}});
            (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_part_is_told_by_its_type_and_size() {
        let data = base64::engine::general_purpose::STANDARD.encode(vec![7_u8; 2048]);
        let content = json!([{"type": "text", "text": "[image] my receipt"},
                             {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}]);
        assert_eq!(
            said(&content),
            "[image] my receipt (a picture: image/png, 2 KB)"
        );
        assert_eq!(said(&json!("hello")), "hello");
    }
}
